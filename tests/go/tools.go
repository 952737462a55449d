//go:build tools

// The franz-go version whose kgo integration suite tests/cluster/test_franz_go_suite.py
// runs (`make go-clients` builds it from the module cache): pinned here so that go.mod
// and go.sum hold it beside the clients of the smoke tests.
package tools

import _ "github.com/twmb/franz-go/pkg/kgo"
