package skerry;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Java AdminClient against Skerry, at its default settings: one line per step,
 * "STEP name ok detail" or "STEP name FAIL exception"; the exit status is the number of
 * failed steps. Run by tests/kafka/test_java_clients.py, which checks the lines.
 */
public final class AdminDriver {
    private static final String TOPIC = "java-admin";
    private static final String GROUP = "java-group";
    private static int failures = 0;

    private interface Step {
        String run() throws Exception;
    }

    private static void step(String name, Step step) {
        try {
            System.out.println("STEP " + name + " ok " + step.run());
        } catch (Exception e) {
            failures++;
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.out.println("STEP " + name + " FAIL " + cause.getClass().getSimpleName()
                    + ": " + cause.getMessage());
        }
        System.out.flush();
    }

    private static Map<String, String> configs(Admin admin) throws Exception {
        return entries(admin).entrySet().stream().collect(
                Collectors.toMap(Map.Entry::getKey, e -> String.valueOf(e.getValue().value())));
    }

    private static Map<String, ConfigEntry> entries(Admin admin) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
        Config config = admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS)
                .get(resource);
        return config.entries().stream().collect(Collectors.toMap(ConfigEntry::name, e -> e));
    }

    /** "name=value/SOURCE" of one config. */
    private static String sourced(Admin admin, String name) throws Exception {
        ConfigEntry e = entries(admin).get(name);
        return name + "=" + e.value() + "/" + e.source();
    }

    private static long committed(Admin admin, TopicPartition p) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(GROUP)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        return offsets.containsKey(p) ? offsets.get(p).offset() : -1;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:" + args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        TopicPartition p0 = new TopicPartition(TOPIC, 0);
        try (Admin admin = Admin.create(props)) {
            step("createTopics", () -> {
                NewTopic topic = new NewTopic(TOPIC, 3, (short) 1)
                        .configs(Map.of("retention.ms", "60000"));
                admin.createTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                return TOPIC;
            });
            step("listTopics", () -> {
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                return String.valueOf(names.contains(TOPIC));
            });
            step("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(TOPIC)).allTopicNames()
                        .get(30, TimeUnit.SECONDS).get(TOPIC);
                return "partitions=" + d.partitions().size();
            });
            step("describeConfigs", () -> "retention.ms=" + configs(admin).get("retention.ms"));
            step("configSources", () -> sourced(admin, "retention.ms") + " "
                    + sourced(admin, "segment.bytes"));
            step("incrementalAlterConfigs", () -> {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
                Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
                        new ConfigEntry("retention.bytes", "8192"), AlterConfigOp.OpType.SET));
                admin.incrementalAlterConfigs(Map.of(resource, ops)).all()
                        .get(30, TimeUnit.SECONDS);
                return "retention.bytes=" + configs(admin).get("retention.bytes");
            });
            step("deleteConfig", () -> {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
                Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE));
                admin.incrementalAlterConfigs(Map.of(resource, ops)).all()
                        .get(30, TimeUnit.SECONDS);
                return sourced(admin, "retention.ms") + " " + sourced(admin, "retention.bytes");
            });
            step("alterConsumerGroupOffsets", () -> {
                // 5 records in partition 0 first: Skerry refuses a commit past the log end
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:" + args[0]);
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(p,
                        new StringSerializer(), new StringSerializer())) {
                    for (int i = 0; i < 5; i++) {
                        producer.send(new ProducerRecord<>(TOPIC, 0, "k", "v" + i))
                                .get(30, TimeUnit.SECONDS);
                    }
                }
                admin.alterConsumerGroupOffsets(GROUP, Map.of(p0, new OffsetAndMetadata(5)))
                        .all().get(30, TimeUnit.SECONDS);
                return GROUP + " offset=" + committed(admin, p0);
            });
            step("resetConsumerGroupOffsets", () -> {
                // what kafka-consumer-groups --reset-offsets --to-earliest does: the earliest
                // offset from ListOffsets, committed for the group
                long earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all()
                        .get(30, TimeUnit.SECONDS).get(p0).offset();
                admin.alterConsumerGroupOffsets(GROUP,
                        Map.of(p0, new OffsetAndMetadata(earliest))).all()
                        .get(30, TimeUnit.SECONDS);
                return "earliest=" + earliest + " offset=" + committed(admin, p0);
            });
            step("listConsumerGroups", () -> {
                Collection<ConsumerGroupListing> groups = admin.listConsumerGroups().all()
                        .get(30, TimeUnit.SECONDS);
                return String.valueOf(groups.stream().anyMatch(g -> g.groupId().equals(GROUP)));
            });
            step("describeConsumerGroups", () -> {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(GROUP))
                        .all().get(30, TimeUnit.SECONDS).get(GROUP);
                return "state=" + d.groupState();
            });
            step("listConsumerGroupOffsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin
                        .listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata()
                        .get(30, TimeUnit.SECONDS);
                return "offset=" + (offsets.containsKey(p0) ? offsets.get(p0).offset() : -1);
            });
            step("deleteConsumerGroupOffsets", () -> {
                admin.deleteConsumerGroupOffsets(GROUP, Set.of(p0)).all()
                        .get(30, TimeUnit.SECONDS);
                Map<TopicPartition, OffsetAndMetadata> offsets = admin
                        .listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata()
                        .get(30, TimeUnit.SECONDS);
                return "left=" + offsets.size();
            });
            step("deleteTopics", () -> {
                admin.deleteTopics(List.of(TOPIC)).all().get(30, TimeUnit.SECONDS);
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                return "listed=" + names.contains(TOPIC);
            });
        }
        System.exit(failures);
    }
}
