package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;

/**
 * The client over SSL, SASL_SSL and SASL_PLAINTEXT listeners (issue 47), its security
 * configured from the options:
 *
 * <ul>
 *   <li>{@code --security-protocol} SSL, SASL_SSL or SASL_PLAINTEXT;
 *   <li>{@code --truststore} the CA's certificate (a PEM truststore);
 *   <li>{@code --keystore} a PEM keystore (the key, PKCS#8, and its chain): mutual TLS;
 *   <li>{@code --mechanism} PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with {@code --username}
 *       and {@code --password}: {@code sasl.jaas.config} of PlainLoginModule or
 *       ScramLoginModule.
 * </ul>
 *
 * {@code secured-round-trip} ({@link #roundTrip}) produces {@code --count} records to {@code
 * --topic} and reads them back in a group; {@code authentication-failure} ({@link
 * #authenticationFailure}) sends one record with credentials the broker refuses and reports
 * what the send threw and how long it took.
 */
final class Security {
    private Security() {}

    static Properties secured(JavaClients.Options options, Properties config) {
        config.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, options.get("security-protocol"));
        String truststore = options.get("truststore", null);
        if (truststore != null) {
            config.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
            config.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, truststore);
        }
        String keystore = options.get("keystore", null);
        if (keystore != null) {
            config.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
            config.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, keystore);
        }
        String mechanism = options.get("mechanism", null);
        if (mechanism != null) {
            String module = mechanism.equals("PLAIN")
                    ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            config.put(SaslConfigs.SASL_MECHANISM, mechanism);
            config.put(SaslConfigs.SASL_JAAS_CONFIG, String.format(
                    "%s required username=\"%s\" password=\"%s\";",
                    module, options.get("username"), options.get("password")));
        }
        return config;
    }

    static Map<String, Object> roundTrip(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        int count = options.integer("count");
        Map<String, Object> result = new LinkedHashMap<>();
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(
                secured(options, JavaClients.producerConfig(options, "java-secured-producer")))) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sends.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> send : sends) offsets.add(send.get(30, TimeUnit.SECONDS).offset());
        }
        result.put("offsets", offsets);
        String group = "java-secured-" + UUID.randomUUID();
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                secured(options, JavaClients.consumerConfig(options, group, "java-secured-consumer")))) {
            consumer.subscribe(List.of(topic));
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (values.size() < count) {
                deadline.check(count + " records of " + topic);
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
            }
            consumer.commitSync();
        }
        result.put("values", values);
        return result;
    }

    static Map<String, Object> authenticationFailure(JavaClients.Options options) throws Exception {
        Properties config = secured(options, JavaClients.producerConfig(options, "java-refused-producer"));
        // Fail on the broker's answer, not on a timeout: no retries of the metadata wait.
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            long start = System.nanoTime();
            Throwable thrown = null;
            try {
                producer.send(new ProducerRecord<>(options.get("topic"), "key", "value")).get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                thrown = e.getCause();
            } catch (Exception e) {
                thrown = e;
            }
            result.put("seconds", (System.nanoTime() - start) / 1e9);
            result.put("exception", thrown == null ? null : thrown.getClass().getName());
            result.put("message", thrown == null ? null : String.valueOf(thrown.getMessage()));
        }
        return result;
    }
}
