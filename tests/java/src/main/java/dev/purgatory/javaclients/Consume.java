package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer in group {@code --group} (classic protocol) subscribes to {@code --topic}, reads
 * {@code --count} records from the earliest, commits synchronously, and reports the records,
 * its assignment, the offsets committed as read back (OffsetFetch) and the log end offsets.
 */
final class Consume {
    private Consume() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        String group = options.get("group");
        int count = options.integer("count");
        List<Map<String, Object>> records = new ArrayList<>();
        List<List<Integer>> assignments = new ArrayList<>();
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(JavaClients.consumerConfig(options, group, "java-consumer"))) {
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    assignments.add(JavaClients.partitions(partitions));
                }
            });
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (records.size() < count) {
                deadline.check(count + " records (have " + records.size() + ")");
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    records.add(JavaClients.record(record));
                }
            }
            consumer.commitSync();
            Set<TopicPartition> assignment = consumer.assignment();
            Map<TopicPartition, Long> committed = new LinkedHashMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(assignment).entrySet()) {
                committed.put(e.getKey(), e.getValue() == null ? null : e.getValue().offset());
            }
            result.put("records", records);
            result.put("assignments", assignments);
            result.put("generation", consumer.groupMetadata().generationId());
            result.put("member_id", consumer.groupMetadata().memberId());
            result.put("committed", JavaClients.byPartition(committed));
            result.put("end_offsets", JavaClients.byPartition(consumer.endOffsets(assignment)));
        }
        return result;
    }
}
