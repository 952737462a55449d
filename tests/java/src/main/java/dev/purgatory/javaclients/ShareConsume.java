package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A member of share group {@code --group} (KIP-932's KafkaShareConsumer, explicit
 * acknowledgement) subscribed to {@code --topic}: it prints {@code polling} once it has
 * polled, then acknowledges (ACCEPT) each record it is given and commits the
 * acknowledgements synchronously, until {@code --idle-ms} pass without a record once it had
 * one (or {@code --wait-ms} pass with none at all). It reports the records it acknowledged
 * and every partition's commit error, if any.
 */
final class ShareConsume {
    private ShareConsume() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        long idleMs = Long.parseLong(options.get("idle-ms", "5000"));
        long waitMs = Long.parseLong(options.get("wait-ms", "30000"));
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, options.get("client-id", "java-share-consumer"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, options.get("group"));
        config.put("share.acknowledgement.mode", "explicit");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<Map<String, Object>> records = new ArrayList<>();
        List<String> commitErrors = new ArrayList<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(config)) {
            consumer.subscribe(Collections.singletonList(options.get("topic")));
            boolean announced = false;
            long last = System.nanoTime();
            while (true) {
                List<Map<String, Object>> polled = new ArrayList<>();
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    polled.add(JavaClients.record(record));
                }
                if (!announced) {
                    System.out.println("polling");
                    System.out.flush();
                    announced = true;
                }
                if (!polled.isEmpty()) {
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : consumer.commitSync().entrySet()) {
                        e.getValue().ifPresent(error -> commitErrors.add(e.getKey() + ": " + error));
                    }
                    records.addAll(polled);
                    last = System.nanoTime();
                }
                long quiet = (System.nanoTime() - last) / 1_000_000;
                if (quiet > (records.isEmpty() ? waitMs : idleMs)) break;
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("records", records);
        result.put("commit_errors", commitErrors);
        return result;
    }
}
