// franz-go and IBM/sarama over a broker's SSL and SASL_SSL listeners (issue 47): per
// client, a producer and a consumer with SCRAM-SHA-512 and with PLAIN over TLS and with
// mutual TLS read back every record they wrote; a wrong password fails with Kafka's
// SASL_AUTHENTICATION_FAILED on the broker's answer. tests/cluster/test_go_security.py
// starts the broker and sets SECURED_SASL_SSL and SECURED_SSL (the listeners'
// addresses), SECURED_CA (the CA's certificate), SECURED_KEYSTORE (the client's key
// and certificate chain, PEM) and the users' names and passwords.
package security_test

import (
	"context"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"purgatory.dev/tests/go/internal/cluster"
)

const count = 20

// secured is where the broker's secured listeners are and who may connect.
type secured struct {
	saslSSL, ssl         string
	scramUser, scramPass string
	plainUser, plainPass string
	ca, keystore         string
}

func securedBroker(t *testing.T) secured {
	t.Helper()
	s := secured{
		saslSSL:   os.Getenv("SECURED_SASL_SSL"),
		ssl:       os.Getenv("SECURED_SSL"),
		scramUser: os.Getenv("SECURED_SCRAM_USER"),
		scramPass: os.Getenv("SECURED_SCRAM_PASSWORD"),
		plainUser: os.Getenv("SECURED_PLAIN_USER"),
		plainPass: os.Getenv("SECURED_PLAIN_PASSWORD"),
		ca:        os.Getenv("SECURED_CA"),
		keystore:  os.Getenv("SECURED_KEYSTORE"),
	}
	if s.saslSSL == "" {
		t.Skip("SECURED_SASL_SSL is unset: tests/cluster/test_go_security.py runs these against a broker")
	}
	return s
}

// tlsConfig trusts the CA; with mutual, it presents the client's certificate too.
func (s secured) tlsConfig(t *testing.T, mutual bool) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(s.ca)
	if err != nil {
		t.Fatalf("CA: %v", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x509.NewCertPool()}
	if !cfg.RootCAs.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", s.ca)
	}
	if mutual {
		// One PEM file holds the key and the chain: LoadX509KeyPair takes each from it.
		cert, err := tls.LoadX509KeyPair(s.keystore, s.keystore)
		if err != nil {
			t.Fatalf("client keystore: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// A way of connecting: SASL_SSL with a SASL mechanism, or SSL with a client certificate.
type security struct {
	name      string
	mechanism string // sasl.Mechanism's name; "" for mutual TLS
}

var (
	saslSecurities = []security{{"scram-sha-512", "SCRAM-SHA-512"}, {"plain", "PLAIN"}}
	securities     = slices.Concat(saslSecurities, []security{{"mutual-tls", ""}})
)

// forEach runs f against the broker as a subtest per way of connecting.
func forEach(t *testing.T, secs []security, f func(t *testing.T, s secured, sec security)) {
	s := securedBroker(t)
	for _, sec := range secs {
		t.Run(sec.name, func(t *testing.T) { f(t, s, sec) })
	}
}

func (s secured) address(sec security) string {
	if sec.mechanism == "" {
		return s.ssl
	}
	return s.saslSSL
}

func (s secured) credentials(sec security) (string, string) {
	if sec.mechanism == "PLAIN" {
		return s.plainUser, s.plainPass
	}
	return s.scramUser, s.scramPass
}

func values() []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("value-%d", i)
	}
	return out
}

func sameValues(t *testing.T, read []string) {
	t.Helper()
	want := values()
	if len(read) != len(want) {
		t.Fatalf("read %d records, want %d: %v", len(read), len(want), read)
	}
	for i := range want {
		if read[i] != want[i] {
			t.Fatalf("record %d is %q, want %q (read %v)", i, read[i], want[i], read)
		}
	}
}

// refusedAtOnce fails the test unless err is want and came on the broker's first answer
// (within 5 s, not after a client's timeout); it logs how long it took.
func refusedAtOnce(t *testing.T, client string, err, want error, took time.Duration) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s, after %v: got %v, want %v", client, took, err, want)
	}
	if took > 5*time.Second {
		t.Fatalf("%s: the authentication error took %v", client, took)
	}
	t.Logf("%s: %v after %.3f s", client, err, took.Seconds())
}

// ---- franz-go

func franzMechanism(sec security, user, pass string) sasl.Mechanism {
	switch sec.mechanism {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	return nil
}

func franzClient(t *testing.T, s secured, sec security, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append(opts, kgo.SeedBrokers(s.address(sec)), kgo.DialTLSConfig(s.tlsConfig(t, sec.mechanism == "")))
	user, _ := s.credentials(sec)
	if mechanism := franzMechanism(sec, user, pass); mechanism != nil {
		opts = append(opts, kgo.SASL(mechanism))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestFranzGoProducesAndConsumesOverSaslSslAndMutualTls(t *testing.T) {
	forEach(t, securities, func(t *testing.T, s secured, sec security) {
		topic := cluster.Name("franz-go-" + sec.name)
		_, pass := s.credentials(sec)
		producer := franzClient(t, s, sec, pass,
			kgo.DefaultProduceTopic(topic),
			kgo.AllowAutoTopicCreation(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), // every record to partition 0, in order
		)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var records []*kgo.Record
		for i, v := range values() {
			records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(v), Partition: 0})
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		consumer := franzClient(t, s, sec, pass,
			kgo.ConsumerGroup(cluster.Name("franz-go-group")),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
		var read []string
		for len(read) < count {
			fetches := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("read %d of %d records: %v", len(read), count, err)
			}
			for _, err := range fetches.Errors() {
				t.Fatalf("fetch: %v", err.Err)
			}
			fetches.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
		}
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		sameValues(t, read)
	})
}

func TestFranzGoWrongPasswordFailsWithSaslAuthenticationFailed(t *testing.T) {
	forEach(t, saslSecurities, func(t *testing.T, s secured, sec security) {
		cl := franzClient(t, s, sec, "wrong")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		err := cl.Ping(ctx)
		took := time.Since(start)
		refusedAtOnce(t, "franz-go "+sec.name, err, kerr.SaslAuthenticationFailed, took)
	})
}

// ---- sarama

// xdgSCRAM is sarama's SCRAMClient with github.com/xdg-go/scram, as sarama's example has it.
type xdgSCRAM struct {
	conversation *xdgscram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authzID string) error {
	client, err := xdgscram.HashGeneratorFcn(sha512.New).NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conversation = client.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conversation.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conversation.Done() }

func saramaConfig(t *testing.T, s secured, sec security, pass string) *sarama.Config {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "purgatory-sarama-secured"
	cfg.Version = sarama.V3_9_0_0
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = s.tlsConfig(t, sec.mechanism == "")
	if sec.mechanism != "" {
		user, _ := s.credentials(sec)
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
		cfg.Net.SASL.Mechanism = sarama.SASLMechanism(sec.mechanism)
		if sec.mechanism == sarama.SASLTypeSCRAMSHA512 {
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{} }
		}
	}
	return cfg
}

func TestSaramaProducesAndConsumesOverSaslSslAndMutualTls(t *testing.T) {
	forEach(t, securities, func(t *testing.T, s secured, sec security) {
		topic := cluster.Name("sarama-" + sec.name)
		_, pass := s.credentials(sec)
		cfg := saramaConfig(t, s, sec, pass)
		client, err := sarama.NewClient([]string{s.address(sec)}, cfg)
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		defer func() { _ = client.Close() }()
		producer, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
		for i, v := range values() {
			_, offset, err := producer.SendMessage(&sarama.ProducerMessage{
				Topic: topic, Partition: 0, Value: sarama.StringEncoder(v),
			})
			if err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
			if offset != int64(i) {
				t.Fatalf("%s at offset %d, want %d", v, offset, i)
			}
		}
		_ = producer.Close()
		consumer, err := sarama.NewConsumerFromClient(client)
		if err != nil {
			t.Fatalf("consumer: %v", err)
		}
		defer func() { _ = consumer.Close() }()
		partition, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
		defer func() { _ = partition.Close() }()
		var read []string
		deadline := time.After(30 * time.Second)
		for len(read) < count {
			select {
			case m := <-partition.Messages():
				read = append(read, string(m.Value))
			case err := <-partition.Errors():
				t.Fatalf("consume: %v", err)
			case <-deadline:
				t.Fatalf("read %d of %d records in 30 s", len(read), count)
			}
		}
		sameValues(t, read)
	})
}

func TestSaramaWrongPasswordFailsWithSaslAuthenticationFailed(t *testing.T) {
	forEach(t, saslSecurities, func(t *testing.T, s secured, sec security) {
		cfg := saramaConfig(t, s, sec, "wrong")
		// The broker's answer alone: sarama's default metadata retries (3, 250 ms apart)
		// would add ~0.9 s to when NewClient gives up.
		cfg.Metadata.Retry.Max = 0
		start := time.Now()
		client, err := sarama.NewClient([]string{s.address(sec)}, cfg)
		took := time.Since(start)
		if err == nil {
			_ = client.Close()
		}
		refusedAtOnce(t, "sarama "+sec.name, err, sarama.ErrSASLAuthenticationFailed, took)
	})
}
