// A franz-go kfake cluster as a process of its own, for `purgatory perf compare`: it
// starts -brokers in-memory kfake brokers on 127.0.0.1 (ephemeral ports unless -ports
// says), prints one line "ready host:port,host:port,..." on stdout once they listen, and
// closes the cluster when stdin closes or on SIGTERM/SIGINT.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	brokers := flag.Int("brokers", 3, "number of brokers")
	ports := flag.String("ports", "", "comma-separated ports, one per broker (default: ephemeral)")
	partitions := flag.Int("default-partitions", 1, "partitions of an auto-created topic")
	flag.Parse()

	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if *ports != "" {
		var numbers []int
		for _, p := range strings.Split(*ports, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				fmt.Fprintf(os.Stderr, "kfake: bad port %q\n", p)
				os.Exit(2)
			}
			numbers = append(numbers, n)
		}
		opts = append(opts, kfake.Ports(numbers...))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", strings.Join(cluster.ListenAddrs(), ","))

	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		done <- struct{}{}
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		done <- struct{}{}
	}()
	<-done
	cluster.Close()
}
