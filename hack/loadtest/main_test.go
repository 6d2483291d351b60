package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLoadtestAnswers runs a short, small load test: every review in the mix
// gets the answer it must (clean and exempted admitted, refused refused),
// over TLS through controller-runtime's webhook server; -compare also runs
// the null handler first.
func TestLoadtestAnswers(t *testing.T) {
	var out bytes.Buffer
	small := options{policies: 10, exceptions: 100, namespaces: 10, duration: 500 * time.Millisecond, concurrency: 2}
	if err := runCompare(small, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "null handler: throughput:") || !strings.Contains(out.String(), "podsieve: throughput:") ||
		!strings.Contains(out.String(), "of the null handler's throughput") {
		t.Fatalf("no throughput line:\n%s", out.String())
	}
}
