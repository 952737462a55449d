package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The AdminClient on a topic it makes and a group it watches: createTopics ({@code
 * --partitions}, replication factor 3, retention.ms), describeTopics, describeConfigs,
 * describeCluster, listTopics, listOffsets after 5 records on partition 0,
 * listConsumerGroups and describeConsumerGroups with one member reading and after it left,
 * listConsumerGroupOffsets, deleteTopics; and the errors: creating the topic again, describing
 * and deleting a topic that does not exist.
 */
final class AdminScenario {
    private AdminScenario() {}

    static final String RETENTION_MS = "3600000";

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        String group = options.get("group");
        String missing = options.get("missing-topic");
        int partitions = options.integer("partitions");
        Map<String, Object> result = new LinkedHashMap<>();
        List<Map<String, Object>> errors = new ArrayList<>();
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-admin");
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(config)) {
            NewTopic newTopic = new NewTopic(topic, partitions, (short) 3)
                    .configs(Collections.singletonMap("retention.ms", RETENTION_MS));
            CreateTopicsResult created = admin.createTopics(Collections.singletonList(newTopic));
            created.all().get(30, TimeUnit.SECONDS);
            Map<String, Object> create = new LinkedHashMap<>();
            create.put("partitions", created.numPartitions(topic).get());
            create.put("replication_factor", created.replicationFactor(topic).get());
            create.put("topic_id", created.topicId(topic).get().toString());
            ConfigEntry createdRetention = created.config(topic).get().get("retention.ms");
            create.put("retention_ms", createdRetention == null ? null : createdRetention.value());
            result.put("create", create);

            result.put("describe_topic", describeTopic(admin, topic));

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config topicConfig = admin.describeConfigs(Collections.singletonList(resource)).all().get().get(resource);
            ConfigEntry retention = topicConfig.get("retention.ms");
            Map<String, Object> configs = new LinkedHashMap<>();
            configs.put("retention_ms", retention.value());
            configs.put("retention_ms_source", retention.source().name());
            result.put("describe_configs", configs);

            DescribeClusterResult cluster = admin.describeCluster();
            Map<String, Object> describeCluster = new LinkedHashMap<>();
            describeCluster.put("cluster_id", cluster.clusterId().get());
            Node controller = cluster.controller().get();
            describeCluster.put("controller", controller == null ? null : controller.id());
            List<Map<String, Object>> nodes = new ArrayList<>();
            for (Node node : cluster.nodes().get()) nodes.add(node(node));
            nodes.sort((a, b) -> Integer.compare((Integer) a.get("id"), (Integer) b.get("id")));
            describeCluster.put("nodes", nodes);
            result.put("describe_cluster", describeCluster);

            List<String> names = new ArrayList<>(admin.listTopics().names().get());
            Collections.sort(names);
            result.put("list_topics", names);

            Map<String, Object> produced = new LinkedHashMap<>();
            try (KafkaProducer<String, String> producer =
                    new KafkaProducer<>(JavaClients.producerConfig(options, "java-admin-producer"))) {
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "key-" + i, "value-" + i)).get(30, TimeUnit.SECONDS);
                }
            }
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            produced.put("earliest_0", offset(admin, p0, OffsetSpec.earliest()));
            produced.put("latest_0", offset(admin, p0, OffsetSpec.latest()));
            produced.put("max_timestamp_0", offset(admin, p0, OffsetSpec.maxTimestamp()));
            produced.put("latest_1", offset(admin, p1, OffsetSpec.latest()));
            result.put("list_offsets", produced);

            try (KafkaConsumer<String, String> consumer =
                    new KafkaConsumer<>(JavaClients.consumerConfig(options, group, "java-admin-consumer"))) {
                consumer.subscribe(Collections.singletonList(topic));
                int read = 0;
                JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
                while (read < 5) {
                    deadline.check("5 records, have " + read);
                    for (ConsumerRecord<String, String> ignored : consumer.poll(Duration.ofMillis(200))) read++;
                }
                consumer.commitSync();
                result.put("list_groups", listGroups(admin, group));
                result.put("describe_group", describeGroup(admin, group));
            }
            result.put("describe_group_after_leave", describeGroup(admin, group));
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, Long> committed = new LinkedHashMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                committed.put(e.getKey(), e.getValue().offset());
            }
            result.put("group_offsets", JavaClients.byPartition(committed));

            try {
                admin.createTopics(Collections.singletonList(new NewTopic(topic, partitions, (short) 3)))
                        .all()
                        .get();
                errors.add(Collections.singletonMap("operation", "create_existing_succeeded"));
            } catch (Exception e) {
                errors.add(JavaClients.failure("create_existing", e));
            }
            try {
                admin.describeTopics(Collections.singletonList(missing)).allTopicNames().get();
                errors.add(Collections.singletonMap("operation", "describe_missing_succeeded"));
            } catch (Exception e) {
                errors.add(JavaClients.failure("describe_missing", e));
            }
            try {
                admin.deleteTopics(Collections.singletonList(missing)).all().get();
                errors.add(Collections.singletonMap("operation", "delete_missing_succeeded"));
            } catch (Exception e) {
                errors.add(JavaClients.failure("delete_missing", e));
            }
            result.put("errors", errors);

            admin.deleteTopics(Collections.singletonList(topic)).all().get(30, TimeUnit.SECONDS);
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (admin.listTopics().names().get().contains(topic)) {
                deadline.check(topic + " to leave listTopics after deleteTopics");
                Thread.sleep(50);
            }
            Map<String, Object> deleted = new LinkedHashMap<>();
            deleted.put("listed", false);
            try {
                admin.describeTopics(Collections.singletonList(topic)).allTopicNames().get();
                deleted.put("describe", "succeeded");
            } catch (Exception e) {
                deleted.put("describe", JavaClients.failure("describe_deleted", e).get("exception"));
            }
            result.put("after_delete", deleted);
        }
        return result;
    }

    /**
     * describeTopics, asked again while a broker still answers UNKNOWN_TOPIC_OR_PARTITION for
     * the topic just created (metadata reaches brokers after CreateTopics returns, as in Kafka).
     */
    private static Map<String, Object> describeTopic(Admin admin, String topic) throws Exception {
        JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
        int attempts = 0;
        TopicDescription description;
        while (true) {
            attempts++;
            try {
                description = admin.describeTopics(Collections.singletonList(topic)).allTopicNames().get().get(topic);
                break;
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || deadline.passed()) throw e;
                Thread.sleep(20);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("attempts", attempts);
        out.put("name", description.name());
        out.put("topic_id", description.topicId().toString());
        out.put("internal", description.isInternal());
        List<Map<String, Object>> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : description.partitions()) {
            Map<String, Object> partition = new LinkedHashMap<>();
            partition.put("partition", info.partition());
            partition.put("leader", info.leader() == null ? null : info.leader().id());
            partition.put("replicas", ids(info.replicas()));
            partition.put("isr", ids(info.isr()));
            partitions.add(partition);
        }
        out.put("partitions", partitions);
        return out;
    }

    private static Long offset(Admin admin, TopicPartition partition, OffsetSpec spec) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo info =
                admin.listOffsets(Collections.singletonMap(partition, spec)).partitionResult(partition).get();
        return info.offset();
    }

    private static List<Map<String, Object>> listGroups(Admin admin, String group) throws Exception {
        List<Map<String, Object>> out = new ArrayList<>();
        for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("group_id", listing.groupId());
            entry.put("simple", listing.isSimpleConsumerGroup());
            entry.put("state", listing.state().map(Object::toString).orElse(null));
            out.add(entry);
        }
        return out;
    }

    @SuppressWarnings("deprecation") // state(): groupState() from 4.0 on, absent in 3.x
    private static Map<String, Object> describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription description =
                admin.describeConsumerGroups(Collections.singletonList(group)).all().get().get(group);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("group_id", description.groupId());
        out.put("state", description.state().toString());
        out.put("simple", description.isSimpleConsumerGroup());
        out.put("assignor", description.partitionAssignor());
        out.put("coordinator", description.coordinator() == null ? null : description.coordinator().id());
        List<Map<String, Object>> members = new ArrayList<>();
        for (MemberDescription member : description.members()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("member_id", member.consumerId());
            m.put("client_id", member.clientId());
            m.put("host", member.host());
            m.put("assignment", JavaClients.partitions(member.assignment().topicPartitions()));
            members.add(m);
        }
        out.put("members", members);
        return out;
    }

    private static Map<String, Object> node(Node node) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", node.id());
        out.put("host", node.host());
        out.put("port", node.port());
        return out;
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node node : nodes) out.add(node.id());
        return out;
    }
}
