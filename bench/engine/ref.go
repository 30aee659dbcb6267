package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// DefaultRef is the reference commit: the start of issue 16, before the
// engine took a context argument.
const DefaultRef = "d53c18b"

// RefBuild builds testdata/refdriver against the gpu package of commit ref
// of the repository at root, in a temporary Go workspace (the driver's
// module, refdriver, holds the old engine as refdriver/refgpu; this tree's
// module gives it Data and Measure). It needs git and the go command. The
// returned cleanup removes the workspace and the binary.
func RefBuild(ctx context.Context, root, ref string) (bin string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "regressd-refdriver-")
	if err != nil {
		return "", nil, fmt.Errorf("ref build: %w", err)
	}
	defer func() {
		if err != nil { // the returns below set cleanup to nil with the error
			os.RemoveAll(tmp)
		}
	}()
	mod := filepath.Join(tmp, "refdriver")
	if err := extractGPU(ctx, root, ref, filepath.Join(mod, "refgpu")); err != nil {
		return "", nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, "bench", "engine", "testdata", "refdriver", "main.go"))
	if err != nil {
		return "", nil, fmt.Errorf("ref build: %w", err)
	}
	sysVer, err := run(ctx, root, "go", "list", "-m", "-f", "{{.Version}}", "golang.org/x/sys")
	if err != nil {
		return "", nil, err
	}
	gomod := "module refdriver\n\ngo 1.26.0\n\nrequire golang.org/x/sys " + strings.TrimSpace(sysVer) + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return "", nil, fmt.Errorf("ref build: %w", err)
	}
	for name, b := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			return "", nil, fmt.Errorf("ref build: %w", err)
		}
	}
	if _, err := run(ctx, tmp, "go", "work", "init", "./refdriver", root); err != nil {
		return "", nil, err
	}
	bin = filepath.Join(tmp, "refdriver.bin")
	if _, err := run(ctx, mod, "go", "build", "-o", bin, "."); err != nil {
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(tmp) }, nil
}

// extractGPU writes the gpu package's non-test files of commit ref into dir.
func extractGPU(ctx context.Context, root, ref, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", ref, "gpu")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ref build: git archive %s: %w: %s", ref, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ref build: %w", err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("ref build: read archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg || path.Dir(h.Name) != "gpu" || strings.HasSuffix(h.Name, "_test.go") {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("ref build: read archive: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(h.Name)), b, 0o644); err != nil {
			return fmt.Errorf("ref build: %w", err)
		}
		files++
	}
	if files == 0 {
		return fmt.Errorf("ref build: commit %s has no gpu package", ref)
	}
	return nil
}

func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ref build: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// RepoRoot is the top of the git repository holding dir.
func RepoRoot(ctx context.Context, dir string) (string, error) {
	out, err := run(ctx, dir, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}
