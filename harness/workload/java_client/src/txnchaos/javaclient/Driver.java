package txnchaos.javaclient;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The official Java client (kafka-clients) driven by a workload user over its stdin/stdout.
 *
 * <p>It decides nothing: each command line ({@code <seq>\t<command>\t<args...>}, fields escaped
 * as {@link Lines#split} says) is executed on the main thread in arrival order and answered by
 * one JSON line {@code {"re": seq, "ok": true, ...}} or {@code {"re": seq, "ok": false,
 * "error": {"class", "name", "message"}}}. A record's acknowledgement arrives later as
 * {@code {"ack": seq, ...}} (written by the producer's I/O thread); a consumer's rebalance
 * events as {@code {"event": ...}} lines before the answer of the poll that ran them. The
 * first line, before any command, is {@code {"ready": true, "version": ...}}.
 *
 * <p>When stdin closes (the Python side exited or was killed) the JVM halts at once, closing
 * nothing: an open transaction stays open, as in a crashed application.
 */
public final class Driver {
    private static final Object OUT_LOCK = new Object();
    private static Writer out;

    private static final Set<String> PRODUCER_COMMANDS =
            Set.of("producer", "init", "begin", "flush", "offsets", "commit", "abort", "prepare", "complete");

    private ProducerSide producer;
    private ConsumerSide consumer;

    public static void main(String[] args) throws IOException {
        out = new BufferedWriter(
                new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8));
        // Whatever a library prints must not reach the protocol's stream.
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> readCommands(commands), "stdin");
        reader.setDaemon(true);
        reader.start();
        emit(new Lines.Json()
                .put("ready", true)
                .put("version", clientVersion())
                .put("two_phase", TwoPhase.supported())
                .toString());
        new Driver().serve(commands);
    }

    /**
     * The kafka-clients release on the classpath, from the properties file its jar carries
     * (its AppInfoParser, which reads the same file, moved package in 4.4).
     */
    static String clientVersion() {
        Properties p = new Properties();
        try (java.io.InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (IOException e) {
            // unknown
        }
        return p.getProperty("version", "unknown");
    }

    private static void readCommands(BlockingQueue<String> commands) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                commands.put(line);
            }
        } catch (IOException | InterruptedException e) {
            // treated as end of input
        }
        Runtime.getRuntime().halt(0);
    }

    /** One line to stdout, whole, from whichever thread (answers, acks, events). */
    static void emit(String json) {
        synchronized (OUT_LOCK) {
            try {
                out.write(json);
                out.write('\n');
                out.flush();
            } catch (IOException e) {
                Runtime.getRuntime().halt(0); // the reader is gone
            }
        }
    }

    private void serve(BlockingQueue<String> commands) {
        while (true) {
            String line;
            try {
                line = commands.take();
            } catch (InterruptedException e) {
                return;
            }
            long seq = -1;
            String cmd = "";
            try {
                List<String> f = Lines.split(line);
                cmd = f.get(1);
                seq = Long.parseLong(f.get(0));
                String answer = execute(seq, f.get(1), f.subList(2, f.size()));
                if (answer != null) {
                    emit("{\"re\":" + seq + ",\"ok\":true" + answer + "}");
                }
                if ("exit".equals(f.get(1))) {
                    System.exit(0); // (not halt: a class-data archive is written at exit)
                }
            } catch (Throwable e) {
                boolean producerCall = PRODUCER_COMMANDS.contains(cmd);
                Object tm = producer == null || !producerCall ? null : producer.transactionManager();
                String ids = producer == null ? "" : producer.ids();
                emit("{\"re\":" + seq + ",\"ok\":false,\"error\":" + Failures.describe(e, tm) + ids + "}");
            }
        }
    }

    /** Runs one command; its answer's extra fields (",\"k\":v..." or ""), or null: no answer. */
    private String execute(long seq, String cmd, List<String> a) throws Exception {
        switch (cmd) {
            case "echo": {
                StringBuilder sb = new StringBuilder("[");
                for (int i = 0; i < a.size(); i++) {
                    if (i > 0) sb.append(',');
                    sb.append(Lines.quoted(a.get(i)));
                }
                return ",\"fields\":" + sb.append(']');
            }
            case "exit":
                return "";
            // -- producer --------------------------------------------------------------
            case "producer":
                if (producer != null) throw new IllegalStateException("a producer is open already");
                producer = new ProducerSide(properties(a));
                return producer.ids();
            case "send":
                if (producer == null) {
                    ProducerSide.rejected(seq, new IllegalStateException("no producer is open"), null);
                } else {
                    producer.send(seq, a);
                }
                return null;
            case "close_producer": {
                ProducerSide p = producer;
                producer = null;
                if (p != null) p.close(Long.parseLong(a.get(0)));
                return "";
            }
            case "offsets":
                producer().sendOffsets(a.get(0), consumer, a.subList(1, a.size()));
                return producer.ids();
            case "init":
            case "begin":
            case "flush":
            case "commit":
            case "abort":
            case "prepare":
            case "complete":
                return producer().transactional(cmd, a);
            // -- consumer --------------------------------------------------------------
            case "consumer":
                if (consumer != null) throw new IllegalStateException("a consumer is open already");
                consumer = new ConsumerSide(properties(a));
                return "";
            case "close_consumer": {
                ConsumerSide c = consumer;
                consumer = null;
                if (c != null) c.close(Long.parseLong(a.get(0)));
                return "";
            }
            default:
                if (consumer == null) throw new IllegalArgumentException("unknown command or no consumer: " + cmd);
                return consumer.execute(cmd, a);
        }
    }

    private ProducerSide producer() {
        if (producer == null) throw new IllegalStateException("no producer is open");
        return producer;
    }

    /** {@code key=value} fields as client properties. */
    private static Properties properties(List<String> pairs) {
        Properties p = new Properties();
        for (String kv : pairs) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("not key=value: " + kv);
            p.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }
}
