package dev.purgatory.javaclients;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The AdminClient's read-only views of logs: an idempotent producer writes {@code --count}
 * records to partition 0 of a new topic ({@code --partitions}, replication factor 3), then
 * describeLogDirs of every broker (each dir, and each replica of the topic: size, offset lag,
 * future), describeProducers of every partition (on its leader), and describeTopics with one
 * partition per response (the client pages DescribeTopicPartitions by cursor).
 */
final class LogInfoScenario {
    private LogInfoScenario() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        int partitions = options.integer("partitions");
        int count = options.integer("count");
        Map<String, Object> result = new LinkedHashMap<>();
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-log-info");
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(config)) {
            admin.createTopics(Collections.singletonList(new NewTopic(topic, partitions, (short) 3)))
                    .all()
                    .get(30, TimeUnit.SECONDS);
            try (KafkaProducer<String, String> producer =
                    new KafkaProducer<>(JavaClients.producerConfig(options, "java-log-info-producer"))) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "key-" + i, "value-" + i))
                            .get(30, TimeUnit.SECONDS);
                }
            }

            List<Integer> brokers = new ArrayList<>();
            admin.describeCluster().nodes().get().forEach(node -> brokers.add(node.id()));
            Collections.sort(brokers);
            Map<String, Object> logDirs = new TreeMap<>();
            for (Map.Entry<Integer, Map<String, LogDirDescription>> broker :
                    admin.describeLogDirs(brokers).allDescriptions().get().entrySet()) {
                Map<String, Object> dirs = new TreeMap<>();
                for (Map.Entry<String, LogDirDescription> dir : broker.getValue().entrySet()) {
                    LogDirDescription description = dir.getValue();
                    Map<String, Object> replicas = new TreeMap<>();
                    for (Map.Entry<TopicPartition, ReplicaInfo> replica : description.replicaInfos().entrySet()) {
                        if (!replica.getKey().topic().equals(topic)) {
                            continue;
                        }
                        Map<String, Object> info = new LinkedHashMap<>();
                        info.put("size", replica.getValue().size());
                        info.put("offset_lag", replica.getValue().offsetLag());
                        info.put("future", replica.getValue().isFuture());
                        replicas.put(Integer.toString(replica.getKey().partition()), info);
                    }
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("error", description.error() == null ? null : description.error().getClass().getSimpleName());
                    out.put("total_bytes", description.totalBytes().isPresent() ? description.totalBytes().getAsLong() : null);
                    out.put("usable_bytes", description.usableBytes().isPresent() ? description.usableBytes().getAsLong() : null);
                    out.put("replicas", replicas);
                    dirs.put(dir.getKey(), out);
                }
                logDirs.put(Integer.toString(broker.getKey()), dirs);
            }
            result.put("log_dirs", logDirs);

            List<TopicPartition> asked = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                asked.add(new TopicPartition(topic, p));
            }
            Map<String, Object> producers = new TreeMap<>();
            admin.describeProducers(asked).all().get().forEach((tp, description) -> {
                List<Map<String, Object>> active = new ArrayList<>();
                for (ProducerState state : description.activeProducers()) {
                    Map<String, Object> s = new LinkedHashMap<>();
                    s.put("producer_id", state.producerId());
                    s.put("producer_epoch", state.producerEpoch());
                    s.put("last_sequence", state.lastSequence());
                    s.put("last_timestamp", state.lastTimestamp());
                    s.put("coordinator_epoch", state.coordinatorEpoch().isPresent() ? state.coordinatorEpoch().getAsInt() : null);
                    s.put("txn_start_offset", state.currentTransactionStartOffset().isPresent()
                            ? state.currentTransactionStartOffset().getAsLong() : null);
                    active.add(s);
                }
                producers.put(Integer.toString(tp.partition()), active);
            });
            result.put("producers", producers);

            TopicDescription described = admin.describeTopics(
                            Collections.singletonList(topic), new DescribeTopicsOptions().partitionSizeLimitPerResponse(1))
                    .allTopicNames()
                    .get()
                    .get(topic);
            List<Map<String, Object>> parts = new ArrayList<>();
            for (TopicPartitionInfo p : described.partitions()) {
                Map<String, Object> info = new LinkedHashMap<>();
                info.put("partition", p.partition());
                info.put("leader", p.leader() == null ? null : p.leader().id());
                info.put("replicas", p.replicas().size());
                info.put("isr", p.isr().size());
                parts.add(info);
            }
            result.put("described_partitions", parts);
        }
        return result;
    }
}
