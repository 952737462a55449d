package dev.purgatory.javaclients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * An idempotent producer (enable.idempotence=true, acks=all) sends {@code --count} records to
 * {@code --topic}, key {@code key-i}, value {@code value-i}, headers {@code seq=i} and {@code
 * source=java}, partitioned by key; reports each record's partition and offset as acknowledged,
 * and the producer's own retry and error counts.
 */
final class Produce {
    private Produce() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        int count = options.integer("count");
        List<Map<String, Object>> acknowledged = new ArrayList<>();
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(JavaClients.producerConfig(options, "java-producer"))) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("seq", JavaClients.utf8(Integer.toString(i)));
                headers.add("source", JavaClients.utf8("java"));
                sends.add(producer.send(new ProducerRecord<>(topic, null, "key-" + i, "value-" + i, headers)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata metadata = sends.get(i).get(30, TimeUnit.SECONDS);
                Map<String, Object> ack = new LinkedHashMap<>();
                ack.put("seq", i);
                ack.put("key", "key-" + i);
                ack.put("partition", metadata.partition());
                ack.put("offset", metadata.offset());
                ack.put("timestamp", metadata.timestamp());
                acknowledged.add(ack);
            }
            result.put("acknowledged", acknowledged);
            for (Map.Entry<MetricName, ? extends Metric> metric : producer.metrics().entrySet()) {
                MetricName name = metric.getKey();
                if (name.group().equals("producer-metrics")
                        && (name.name().equals("record-retry-total") || name.name().equals("record-error-total"))) {
                    result.put(name.name(), metric.getValue().metricValue());
                }
            }
        }
        return result;
    }
}
