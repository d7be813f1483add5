package txnchaos.javaclient;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TransactionAbortedException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** One KafkaProducer and the commands that drive it. */
final class ProducerSide {
    static final String PAD_HEADER = "txnchaos-pad";

    private final KafkaProducer<byte[], byte[]> producer;
    private final Object transactionManager;
    private final Thread owner = Thread.currentThread();
    /** True while send() runs: a callback then fires synchronously (the record was refused). */
    private boolean inSend;

    ProducerSide(Properties props) {
        producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        transactionManager = Failures.Reflect.field(producer, "transactionManager");
    }

    Object transactionManager() {
        return transactionManager;
    }

    /** {@code ,"ids":[producerId,epoch]} when the producer has a valid id, else "". */
    String ids() {
        if (transactionManager == null) return "";
        Object ide = Failures.Reflect.call(transactionManager, "producerIdAndEpoch");
        long[] v = Failures.Reflect.idAndEpoch(ide);
        if (v[0] < 0 || v[1] < 0) return "";
        return ",\"ids\":[" + v[0] + "," + v[1] + "]";
    }

    /** send: topic, partition, key, value, padding bytes. Answered by an ack line only. */
    void send(long seq, List<String> a) {
        inSend = true;
        try {
            RecordHeaders headers = new RecordHeaders();
            int pad = Integer.parseInt(a.get(4));
            if (pad > 0) headers.add(PAD_HEADER, new byte[pad]);
            ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                    a.get(0), Integer.parseInt(a.get(1)), bytes(a.get(2)), bytes(a.get(3)), headers);
            producer.send(record, (meta, e) -> acked(seq, meta, e));
        } catch (Throwable e) {
            rejected(seq, e, transactionManager);
        } finally {
            inSend = false;
        }
    }

    private void acked(long seq, RecordMetadata meta, Exception e) {
        if (e == null) {
            long offset = meta.hasOffset() ? meta.offset() : -1;
            Driver.emit("{\"ack\":" + seq + ",\"offset\":" + offset + "}");
            return;
        }
        boolean refused = inSend && Thread.currentThread() == owner;
        // Aborted before it was sent (the transaction aborted, or failed first): never written.
        boolean sent = !refused && !(e instanceof TransactionAbortedException);
        Driver.emit("{\"ack\":" + seq + ",\"sent\":" + sent + ",\"error\":"
                + Failures.describe(e, transactionManager) + "}");
    }

    static void rejected(long seq, Throwable e, Object tm) {
        Driver.emit("{\"ack\":" + seq + ",\"sent\":false,\"error\":" + Failures.describe(e, tm) + "}");
    }

    private static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    /** offsets: the group id, then topic, partition, offset triples. */
    void sendOffsets(String groupId, ConsumerSide consumer, List<String> triples) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (int i = 0; i + 2 < triples.size(); i += 3) {
            offsets.put(new TopicPartition(triples.get(i), Integer.parseInt(triples.get(i + 1))),
                    new OffsetAndMetadata(Long.parseLong(triples.get(i + 2))));
        }
        // KIP-447: the consumer's generation and member id, so a zombie copier is fenced.
        ConsumerGroupMetadata group = consumer != null ? consumer.groupMetadata() : new ConsumerGroupMetadata(groupId);
        producer.sendOffsetsToTransaction(offsets, group);
    }

    /** The transactional calls; each answers with the producer id and epoch after it. */
    String transactional(String cmd, List<String> a) throws Exception {
        switch (cmd) {
            case "init":
                if (Boolean.parseBoolean(a.get(0))) {
                    TwoPhase.initKeepPrepared(producer);
                    return ids() + ",\"prepared\":" + Lines.quoted(TwoPhase.preparedState(transactionManager));
                }
                producer.initTransactions();
                break;
            case "begin":
                producer.beginTransaction();
                break;
            case "flush":
                producer.flush();
                break;
            case "commit":
                producer.commitTransaction();
                break;
            case "abort":
                producer.abortTransaction();
                break;
            case "prepare":
                return ",\"state\":" + Lines.quoted(TwoPhase.prepare(producer)) + ids();
            case "complete":
                return ",\"committed\":" + TwoPhase.complete(producer, transactionManager, a.get(0)) + ids();
            default:
                throw new IllegalArgumentException(cmd);
        }
        return ids();
    }

    /** Close; {@code timeoutMs} 0 abandons an open transaction (no abort is sent). */
    void close(long timeoutMs) {
        producer.close(Duration.ofMillis(timeoutMs));
    }
}
