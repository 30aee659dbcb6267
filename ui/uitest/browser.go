// Package uitest gives tests a real browser: the system's Chromium, headless,
// driven through chromedp, with every console error, uncaught exception and
// failed load it reports collected for the test to check.
//
// Chromium comes from $REGRESSD_CHROMIUM or the PATH (ops/ensure-chromium.sh
// installs it; `go tool task test` runs that first). Without one a test is
// skipped with a message, except under CI (CI set), where it fails: CI never
// skips browser tests.
package uitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names a Chrome or Chromium binary to use instead of the PATH's.
const EnvChromium = "REGRESSD_CHROMIUM"

// Browser is a headless Chromium for one test; it closes when the test ends.
type Browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

// FindChromium returns the browser binary to drive, or "".
func FindChromium() string {
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless Chromium with a fresh profile, or skips the test
// when there is none (fails it under CI).
func New(t testing.TB) *Browser {
	t.Helper()
	bin := FindChromium()
	if bin == "" {
		msg := "no Chromium found (set " + EnvChromium + ", or run 'bash ops/ensure-chromium.sh', which 'go tool task test' does)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + ": browser tests must run in CI")
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	stop := func() {
		cancelCtx()
		cancelAlloc()
	}
	b := &Browser{t: t, ctx: ctx}
	// Start the browser now, so a broken install fails here, clearly. It
	// lives as long as the context of this first call: ctx, not a shorter one.
	if err := chromedp.Do(ctx); err != nil {
		stop()
		t.Fatalf("start %s: %v", bin, err)
	}
	// Subscribed before any page loads, so nothing the page says is lost.
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return // the browser is closing
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return b
}

// Do runs actions in the page in order, failing the test on error; each
// call has a minute.
func (b *Browser) Do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v (page problems: %v)", err, b.Problems())
	}
}

// Run runs one action in b's page and returns its value, failing the test
// on error.
func Run[T any](b *Browser, action chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		b.t.Fatalf("browser: %v (page problems: %v)", err, b.Problems())
	}
	return v
}

// Problems returns the console errors, uncaught exceptions and browser log
// errors (a failed load, a refused script) seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// NoProblems fails the test if the page reported any problem.
func (b *Browser) NoProblems(where string) {
	b.t.Helper()
	if p := b.Problems(); len(p) > 0 {
		b.t.Fatalf("%s: the page reported %d problem(s):\n%s", where, len(p), strings.Join(p, "\n"))
	}
}
