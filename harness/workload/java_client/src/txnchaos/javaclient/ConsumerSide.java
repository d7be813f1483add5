package txnchaos.javaclient;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** One KafkaConsumer and the commands that drive it. Offset -2 means "the log start". */
final class ConsumerSide {
    static final long BEGINNING = -2;

    private final KafkaConsumer<byte[], byte[]> consumer;

    ConsumerSide(Properties props) {
        consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    ConsumerGroupMetadata groupMetadata() {
        return consumer.groupMetadata();
    }

    String execute(String cmd, List<String> a) {
        switch (cmd) {
            case "subscribe":
                consumer.subscribe(a, new Listener());
                return "";
            case "assign": {
                Map<TopicPartition, Long> to = positions(a);
                consumer.assign(to.keySet());
                seek(to);
                return "";
            }
            case "seek":
                seek(positions(a));
                return "";
            case "poll":
                return poll(Long.parseLong(a.get(0)));
            case "commit_offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                positions(a).forEach((tp, o) -> offsets.put(tp, new OffsetAndMetadata(o)));
                consumer.commitSync(offsets);
                return "";
            }
            case "watermarks": {
                TopicPartition tp = new TopicPartition(a.get(0), Integer.parseInt(a.get(1)));
                Duration timeout = Duration.ofMillis(Long.parseLong(a.get(2)));
                Set<TopicPartition> one = Set.of(tp);
                long low = consumer.beginningOffsets(one, timeout).get(tp);
                long high = consumer.endOffsets(one, timeout).get(tp);
                return ",\"low\":" + low + ",\"high\":" + high;
            }
            case "rewind":
                return rewind(Long.parseLong(a.get(0)));
            default:
                throw new IllegalArgumentException("unknown command: " + cmd);
        }
    }

    /** topic, partition, offset triples. */
    private static Map<TopicPartition, Long> positions(List<String> a) {
        Map<TopicPartition, Long> out = new HashMap<>();
        for (int i = 0; i + 2 < a.size(); i += 3) {
            out.put(new TopicPartition(a.get(i), Integer.parseInt(a.get(i + 1))), Long.parseLong(a.get(i + 2)));
        }
        return out;
    }

    private void seek(Map<TopicPartition, Long> to) {
        List<TopicPartition> start = new ArrayList<>();
        to.forEach((tp, o) -> {
            if (o >= 0) consumer.seek(tp, o);
            else if (o == BEGINNING) start.add(tp);
        });
        if (!start.isEmpty()) consumer.seekToBeginning(start);
    }

    private String poll(long timeoutMs) {
        StringBuilder sb = new StringBuilder(",\"records\":[");
        boolean first = true;
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) {
            if (!first) sb.append(',');
            first = false;
            sb.append('[').append(Lines.quoted(r.topic())).append(',').append(r.partition()).append(',')
                    .append(r.offset()).append(',').append(Lines.quoted(text(r.key()))).append(',')
                    .append(Lines.quoted(text(r.value()))).append(']');
        }
        return sb.append(']').toString();
    }

    /** Seek every assigned partition back to the group's committed offset (or the log start). */
    private String rewind(long timeoutMs) {
        Set<TopicPartition> parts = new HashSet<>(consumer.assignment());
        if (parts.isEmpty()) return ",\"parts\":[]";
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(parts, Duration.ofMillis(timeoutMs));
        Map<TopicPartition, Long> to = new HashMap<>();
        for (TopicPartition tp : parts) {
            OffsetAndMetadata o = committed.get(tp);
            to.put(tp, o == null ? BEGINNING : o.offset());
        }
        seek(to);
        StringBuilder sb = new StringBuilder(",\"parts\":[");
        boolean first = true;
        for (Map.Entry<TopicPartition, Long> e : to.entrySet()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('[').append(Lines.quoted(e.getKey().topic())).append(',').append(e.getKey().partition())
                    .append(',').append(e.getValue()).append(']');
        }
        return sb.append(']').toString();
    }

    private static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    void close(long timeoutMs) {
        consumer.close(Duration.ofMillis(timeoutMs));
    }

    /** Rebalance callbacks run inside poll(): their lines precede the poll's answer. */
    private static final class Listener implements ConsumerRebalanceListener {
        private static void event(String what, Collection<TopicPartition> parts) {
            StringBuilder sb = new StringBuilder("[");
            boolean first = true;
            for (TopicPartition tp : parts) {
                if (!first) sb.append(',');
                first = false;
                sb.append('[').append(Lines.quoted(tp.topic())).append(',').append(tp.partition()).append(']');
            }
            Driver.emit("{\"event\":" + Lines.quoted(what) + ",\"parts\":" + sb.append(']') + "}");
        }

        @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            event("assigned", parts);
        }

        @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            if (!parts.isEmpty()) event("revoked", parts);
        }

        @Override public void onPartitionsLost(Collection<TopicPartition> parts) {
            if (!parts.isEmpty()) event("lost", parts);
        }
    }
}
