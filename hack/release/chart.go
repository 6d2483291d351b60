package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// digestLine is image.digest in charts/podsieve/values.yaml, empty there.
var digestLine = regexp.MustCompile(`(?m)^  digest: ""$`)

// PackageChart packages the chart in chartDir with helm into out as
// podsieve-<chartVersion>.tgz: version and appVersion stamped, and
// image.digest set, so that the chart runs the image it was released with
// whatever tag the registry later moves. It returns the package's path.
func PackageChart(ctx context.Context, helm, chartDir, out, chartVersion, appVersion, digest string, created time.Time) (string, error) {
	work, err := os.MkdirTemp("", "podsieve-chart-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	dst := filepath.Join(work, "podsieve")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		return "", fmt.Errorf("copy %s: %w", chartDir, err)
	}
	values := filepath.Join(dst, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		return "", err
	}
	if n := len(digestLine.FindAll(b, -1)); n != 1 {
		return "", fmt.Errorf("%s: want one line `  digest: \"\"` (image.digest) to set, found %d", filepath.Join(chartDir, "values.yaml"), n)
	}
	b = digestLine.ReplaceAll(b, []byte(`  digest: "`+digest+`"`))
	if err := os.WriteFile(values, b, 0o644); err != nil {
		return "", err
	}

	cmd := exec.CommandContext(ctx, helm, "package", dst, "--version", chartVersion, "--app-version", appVersion, "--destination", out)
	// Helm 4 dates the package's files SOURCE_DATE_EPOCH: the same commit
	// packages the same bytes.
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(created.Unix(), 10),
		"HELM_CACHE_HOME="+filepath.Join(work, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(work, "config"), "HELM_DATA_HOME="+filepath.Join(work, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm package: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	tgz := filepath.Join(out, "podsieve-"+chartVersion+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		return "", fmt.Errorf("helm package wrote no %s: %w", tgz, err)
	}
	return tgz, nil
}
