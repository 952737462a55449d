package dev.purgatory.javaclients;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * KIP-320 across a leader change: an idempotent producer writes {@code --count} records to
 * partition 0 of {@code --topic}, a consumer assigned to it (no group) reads them and prints
 * {@code READY}; it keeps polling while the test moves the partition's leadership, until
 * {@code --go-file} exists; then {@code --count} more are written and read. A consumer that
 * sees the new leader epoch validates its position with OffsetForLeaderEpoch before it
 * fetches again. Reports every record read (offset, value).
 */
final class ValidateAfterLeaderChange {
    private ValidateAfterLeaderChange() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        int count = options.integer("count");
        Path go = Paths.get(options.get("go-file"));
        TopicPartition partition = new TopicPartition(topic, 0);
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-validating-consumer");
        config.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "500");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<Map<String, Object>> read = new ArrayList<>();
        try (KafkaProducer<String, String> producer =
                        new KafkaProducer<>(JavaClients.producerConfig(options, "java-validating-producer"));
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            send(producer, topic, 0, count);
            consumer.assign(Collections.singletonList(partition));
            consumer.seekToBeginning(Collections.singletonList(partition));
            readUntil(consumer, read, count);
            System.out.println("READY");
            System.out.flush();
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (!Files.exists(go)) {
                deadline.check("the leader change (" + go + ")");
                collect(consumer, read);
            }
            send(producer, topic, count, count);
            readUntil(consumer, read, 2 * count);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("records", read);
        return result;
    }

    private static void send(KafkaProducer<String, String> producer, String topic, int first, int count)
            throws Exception {
        for (int i = first; i < first + count; i++) {
            producer.send(new ProducerRecord<>(topic, 0, "key-" + i, "value-" + i)).get(30, TimeUnit.SECONDS);
        }
    }

    private static void readUntil(KafkaConsumer<String, String> consumer, List<Map<String, Object>> read, int count) {
        JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
        while (read.size() < count) {
            deadline.check(count + " records (have " + read.size() + ")");
            collect(consumer, read);
        }
    }

    private static void collect(KafkaConsumer<String, String> consumer, List<Map<String, Object>> read) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("offset", record.offset());
            r.put("value", record.value());
            r.put("leader_epoch", record.leaderEpoch().orElse(-1));
            read.add(r);
        }
    }
}
