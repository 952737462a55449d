package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Topics as Kafka Streams makes them, through the AdminClient: a changelog (compacted) and a
 * repartition topic with the configs Streams gives them, each config read back from
 * CreateTopicsResult.config and describeConfigs (value, source, type, synonyms); a topic with
 * a bad config (the exception and Kafka's message); and a LogAppendTime topic whose
 * compression.type is lz4: records produced with gzip and a create time of 1970 come back
 * stamped with the broker's time (timestamp type LogAppendTime) through the Java consumer,
 * which reads the leader's lz4 frames.
 */
final class TopicConfigsScenario {
    private TopicConfigsScenario() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String prefix = options.get("prefix");
        Map<String, String> changelog = new LinkedHashMap<>();
        changelog.put("cleanup.policy", "compact");
        changelog.put("message.timestamp.type", "CreateTime");
        changelog.put("min.compaction.lag.ms", "0");
        changelog.put("max.compaction.lag.ms", "9223372036854775807");
        changelog.put("min.cleanable.dirty.ratio", "0.5");
        changelog.put("delete.retention.ms", "86400000");
        changelog.put("segment.ms", "604800000");
        Map<String, String> repartition = new LinkedHashMap<>();
        repartition.put("cleanup.policy", "delete");
        repartition.put("segment.bytes", "52428800");
        repartition.put("retention.ms", "-1");
        repartition.put("message.timestamp.type", "CreateTime");
        Map<String, String> stamped = new LinkedHashMap<>();
        stamped.put("message.timestamp.type", "LogAppendTime");
        stamped.put("compression.type", "lz4");

        Map<String, Object> result = new LinkedHashMap<>();
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(config)) {
            String changelogTopic = prefix + "-store-changelog";
            String repartitionTopic = prefix + "-agg-repartition";
            String stampedTopic = prefix + "-stamped";
            CreateTopicsResult created = admin.createTopics(Arrays.asList(
                    new NewTopic(changelogTopic, 1, (short) 3).configs(changelog),
                    new NewTopic(repartitionTopic, 1, (short) 3).configs(repartition),
                    new NewTopic(stampedTopic, 1, (short) 3).configs(stamped)));
            created.all().get(30, TimeUnit.SECONDS);
            Config createdConfig = created.config(changelogTopic).get();
            Map<String, Object> fromCreate = new LinkedHashMap<>();
            for (String name : changelog.keySet()) {
                ConfigEntry entry = createdConfig.get(name);
                fromCreate.put(name, entry == null ? null : entry.value());
            }
            result.put("created_changelog", fromCreate);
            result.put("changelog", describe(admin, changelogTopic, changelog.keySet()));
            result.put("repartition", describe(admin, repartitionTopic, repartition.keySet()));

            Map<String, Object> refused = new LinkedHashMap<>();
            try {
                admin.createTopics(Collections.singletonList(new NewTopic(prefix + "-refused", 1, (short) 1)
                        .configs(Collections.singletonMap("cleanup.policy", "shred")))).all().get(30, TimeUnit.SECONDS);
                refused.put("error", null);
            } catch (ExecutionException e) {
                refused.put("error", e.getCause().getClass().getSimpleName());
                refused.put("message", e.getCause().getMessage());
            }
            result.put("refused", refused);
            result.put("stamped", produceAndConsume(options.get("bootstrap"), stampedTopic));
        }
        return result;
    }

    private static Map<String, Object> describe(Admin admin, String topic, Iterable<String> names)
            throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        DescribeConfigsOptions options = new DescribeConfigsOptions().includeSynonyms(true);
        Config described = admin.describeConfigs(Collections.singletonList(resource), options)
                .all().get().get(resource);
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : names) {
            ConfigEntry entry = described.get(name);
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("value", entry.value());
            fields.put("source", entry.source().name());
            fields.put("type", entry.type().name());
            List<String> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym synonym : entry.synonyms()) {
                synonyms.add(synonym.source().name() + ":" + synonym.name() + "=" + synonym.value());
            }
            fields.put("synonyms", synonyms);
            out.put(name, fields);
        }
        return out;
    }

    private static Map<String, Object> produceAndConsume(String bootstrap, String topic)
            throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Properties producerConfig = new Properties();
        producerConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerConfig.put(ProducerConfig.ACKS_CONFIG, "all");
        producerConfig.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "gzip");
        producerConfig.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerConfig.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long before = System.currentTimeMillis();
        List<Long> acknowledged = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
            for (int i = 0; i < 3; i++) {
                RecordMetadata metadata = producer.send(
                        new ProducerRecord<>(topic, 0, 1000L + i, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                acknowledged.add(metadata.timestamp());
            }
        }
        long after = System.currentTimeMillis();
        out.put("window", Arrays.asList(before, after));
        out.put("acknowledged", acknowledged);
        Properties consumerConfig = new Properties();
        consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfig.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerConfig.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<Map<String, Object>> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(partition));
            consumer.seekToBeginning(Collections.singletonList(partition));
            long deadline = System.currentTimeMillis() + 30000;
            while (records.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    Map<String, Object> seen = new LinkedHashMap<>();
                    seen.put("value", record.value());
                    seen.put("timestamp", record.timestamp());
                    seen.put("timestamp_type", record.timestampType().name());
                    records.add(seen);
                }
            }
        }
        out.put("records", records);
        return out;
    }
}
