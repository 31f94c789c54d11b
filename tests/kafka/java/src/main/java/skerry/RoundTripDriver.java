package skerry;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java producer and a subscribe() consumer in a group, both at their default
 * settings (the producer: idempotence on, acks=all), against Skerry: the producer sends
 * COUNT records with headers (a duplicate name, a null value, binary bytes) and explicit
 * timestamps to a topic of 3 partitions; the consumer reads them back and every record is
 * compared with what was sent, byte for byte (key, value, headers in order, timestamp).
 * Prints "STEP name ok detail" or "STEP name FAIL reason" lines for
 * tests/kafka/test_java_clients.py; the exit status is the number of failed steps.
 */
public final class RoundTripDriver {
    private static final long BASE_TS = 1_700_000_000_000L;

    private static byte[] key(int i) {
        return ("key-" + i).getBytes();
    }

    private static byte[] value(int i) {
        byte[] v = new byte[16 + i % 50];
        for (int j = 0; j < v.length; j++) {
            v[j] = (byte) (i * 31 + j * 7);  // every byte value, not only text
        }
        return v;
    }

    private static List<Header> headers(int i) {
        List<Header> h = new ArrayList<>();
        h.add(new RecordHeader("trace", ("t-" + i).getBytes()));
        h.add(new RecordHeader("dup", new byte[] {1}));
        h.add(new RecordHeader("dup", new byte[] {(byte) 0xff, 0, (byte) i}));
        if (i % 3 == 0) {
            h.add(new RecordHeader("nothing", null));
        }
        return h;
    }

    private static String mismatch(ConsumerRecord<byte[], byte[]> r, int i) {
        if (!Arrays.equals(r.key(), key(i))) {
            return "key";
        }
        if (!Arrays.equals(r.value(), value(i))) {
            return "value";
        }
        if (r.timestamp() != BASE_TS + i) {
            return "timestamp " + r.timestamp() + " != " + (BASE_TS + i);
        }
        List<Header> got = new ArrayList<>();
        r.headers().forEach(got::add);
        List<Header> want = headers(i);
        if (got.size() != want.size()) {
            return "headers " + got.size() + " != " + want.size();
        }
        for (int j = 0; j < got.size(); j++) {
            if (!got.get(j).key().equals(want.get(j).key())
                    || !Arrays.equals(got.get(j).value(), want.get(j).value())) {
                return "header " + j + " (" + got.get(j).key() + ")";
            }
        }
        return null;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = "127.0.0.1:" + args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        int failures = 0;

        Properties admin = new Properties();
        admin.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin a = Admin.create(admin)) {
            a.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all()
                    .get(30, TimeUnit.SECONDS);
        }

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int acked = 0;
        String produceError = null;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, null, BASE_TS + i, key(i),
                        value(i), headers(i))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                try {
                    f.get(60, TimeUnit.SECONDS);
                    acked++;
                } catch (Exception e) {
                    if (produceError == null) {
                        Throwable c = e.getCause() != null ? e.getCause() : e;
                        produceError = c.getClass().getSimpleName() + ": " + c.getMessage();
                    }
                }
            }
            // The producer's effective settings: nothing above sets them, so these are
            // kafka-clients' defaults (idempotence on, acks=all).
            ProducerConfig effective = new ProducerConfig(p);
            String settings = " idempotence="
                    + effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG)
                    + " acks=" + effective.getString(ProducerConfig.ACKS_CONFIG);
            if (produceError == null) {
                System.out.println("STEP produce ok acked=" + acked + settings);
            } else {
                failures++;
                System.out.println("STEP produce FAIL acked=" + acked + settings + " "
                        + produceError);
            }
        }
        System.out.flush();

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        Map<String, Integer> seen = new HashMap<>();
        String firstMismatch = null;
        int mismatches = 0;
        long deadline = System.currentTimeMillis() + 90_000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String k = new String(r.key());
                    int i = Integer.parseInt(k.substring(4));
                    seen.merge(k, 1, Integer::sum);
                    String wrong = mismatch(r, i);
                    if (wrong != null) {
                        mismatches++;
                        if (firstMismatch == null) {
                            firstMismatch = k + ": " + wrong;
                        }
                    }
                }
            }
            consumer.commitSync();
        }
        int twice = (int) seen.values().stream().filter(n -> n > 1).count();
        if (seen.size() == count && mismatches == 0 && twice == 0) {
            System.out.println("STEP consume ok read=" + seen.size() + " exact");
        } else {
            failures++;
            System.out.println("STEP consume FAIL read=" + seen.size() + " twice=" + twice
                    + " mismatches=" + mismatches + " first=" + firstMismatch);
        }
        System.out.flush();
        System.exit(failures);
    }
}
