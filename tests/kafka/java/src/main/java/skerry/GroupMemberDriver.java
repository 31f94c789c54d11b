package skerry;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a consumer group for tests/kafka/test_kip848_clients.py and
 * bench/rebalance_compare.py, the Java twin of tests/kafka/group_member.py's confluent-kafka
 * member: it subscribes with {@code group.protocol} as given (consumer: KIP-848), logs its
 * assignments and revocations (from its rebalance listener), every message (partition,
 * offset, value, when consumed, the broker's timestamp) and its commits as JSON lines, and
 * commits synchronously after each poll until the stop file exists.
 *
 * <p>Arguments: bootstrap topic group log name stopFile protocol.
 */
public final class GroupMemberDriver {
    private static PrintWriter log;

    private static synchronized void emit(String json) {
        log.println(json);
        log.flush();
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    private static String parts(Collection<TopicPartition> partitions) {
        List<Integer> ids = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            ids.add(tp.partition());
        }
        Collections.sort(ids);
        return ids.toString();
    }

    public static void main(String[] args) throws IOException {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        log = new PrintWriter(new FileWriter(args[3], true));
        String name = args[4];
        String stop = args[5];
        String protocol = args[6];
        emit("{\"e\": \"start\", \"client\": \"java\", \"pid\": " + ProcessHandle.current().pid()
             + ", \"t\": " + now() + "}");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (!protocol.equals("consumer")) {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emit("{\"e\": \"revoke\", \"member\": \"" + name + "\", \"parts\": "
                         + parts(partitions) + ", \"t\": " + now() + "}");
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    emit("{\"e\": \"revoke\", \"member\": \"" + name + "\", \"lost\": true, "
                         + "\"parts\": " + parts(partitions) + ", \"t\": " + now() + "}");
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    emit("{\"e\": \"assign\", \"member\": \"" + name + "\", \"parts\": "
                         + parts(partitions) + ", \"t\": " + now() + "}");
                }
            });
            long seen = 0;
            while (!Files.exists(Paths.get(stop))) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(10));
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("{\"e\": \"msg\", \"p\": " + r.partition() + ", \"o\": " + r.offset()
                         + ", \"v\": \"" + new String(r.value()) + "\", \"t\": " + now()
                         + ", \"ts\": " + (r.timestamp() / 1000.0) + "}");
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    seen++;
                }
                if (!offsets.isEmpty()) {
                    try {
                        consumer.commitSync(offsets);
                        StringBuilder json = new StringBuilder("{\"e\": \"commit\", \"offsets\": {");
                        String sep = "";
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                            json.append(sep).append("\"").append(e.getKey().partition())
                                .append("\": ").append(e.getValue().offset());
                            sep = ", ";
                        }
                        emit(json.append("}}").toString());
                    } catch (RuntimeException error) {
                        emit("{\"e\": \"commit-failed\", \"error\": \""
                             + error.getClass().getSimpleName() + "\"}");
                    }
                }
            }
            emit("{\"e\": \"done\", \"count\": " + seen + "}");
        }
    }
}
