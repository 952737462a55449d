// Package cluster tells the Go client tests where the Purgatory cluster under test is
// (PURGATORY_BOOTSTRAP, set by tests/cluster/test_go_clients.py) and names their topics.
package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"
)

// Seeds is the cluster's bootstrap list; the test skips when PURGATORY_BOOTSTRAP is unset.
func Seeds(t *testing.T) []string {
	t.Helper()
	bootstrap := os.Getenv("PURGATORY_BOOTSTRAP")
	if bootstrap == "" {
		t.Skip("PURGATORY_BOOTSTRAP is unset: tests/cluster/test_go_clients.py runs these against a cluster")
	}
	return strings.Split(bootstrap, ",")
}

// Name is prefix followed by a random suffix, so that reruns against one cluster never
// meet an earlier run's topic or group.
func Name(prefix string) string {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return prefix + "-" + hex.EncodeToString(suffix)
}

// Eventually polls cond until it returns nil or the deadline passes, then fails with the
// last error.
func Eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
