package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLoadtestAnswers runs a short, small load test: every review in the mix
// gets the answer it must (clean and exempted admitted, refused refused),
// over TLS through controller-runtime's webhook server.
func TestLoadtestAnswers(t *testing.T) {
	var out bytes.Buffer
	if err := run(10, 100, 10, 500*time.Millisecond, 2, "", false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "throughput:") {
		t.Fatalf("no throughput line:\n%s", out.String())
	}
}
