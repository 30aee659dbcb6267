package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/tsdb"
)

// Triggers is the trigger registry the page lists (scheduler.Store).
type Triggers interface {
	// List returns every trigger, sorted by name.
	List(ctx context.Context) ([]scheduler.Trigger, error)
	// Get returns one trigger, or an error wrapping
	// scheduler.ErrTriggerNotFound.
	Get(ctx context.Context, name string) (scheduler.Trigger, error)
}

// Config configures the status page and its JSON endpoints.
type Config struct {
	// Triggers is the trigger registry. Required.
	Triggers Triggers
	// JS reads the dead-letter stream and the status bucket. Required.
	JS jetstream.JetStream
	// DB reads the task ledger and the series. nil when this process has
	// no database: the page then says runs and charts are unavailable.
	DB *tsdb.DB
	// Authorize wraps every handler in the admin API's access rule
	// (scheduler.Authorize). nil serves without one.
	Authorize func(http.Handler) http.Handler
	Logger    *slog.Logger
}

// UI serves the status page (GET /ui/…) and the JSON behind it.
type UI struct {
	cfg    Config
	assets assets
	shell  *template.Template
	log    *slog.Logger
}

// New loads the embedded assets.
func New(cfg Config) (*UI, error) {
	if cfg.Triggers == nil || cfg.JS == nil {
		return nil, errors.New("ui: triggers and a JetStream context are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := loadAssets()
	if err != nil {
		return nil, err
	}
	shell, err := template.New("index.html").Funcs(template.FuncMap{"asset": a.url}).ParseFS(files, "assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("parse page: %w", err)
	}
	// Every asset the shell names must exist: fail at start, not in a browser.
	if err := shell.Execute(&bytes.Buffer{}, pageData{Page: "overview"}); err != nil {
		return nil, fmt.Errorf("render page: %w", err)
	}
	return &UI{cfg: cfg, assets: a, shell: shell, log: cfg.Logger}, nil
}

// Routes registers the page, its assets and its JSON endpoints on mux.
func (u *UI) Routes(mux *http.ServeMux) {
	handle := func(pattern string, h http.HandlerFunc) {
		var hh http.Handler = h
		if u.cfg.Authorize != nil {
			hh = u.cfg.Authorize(hh)
		}
		mux.Handle(pattern, hh)
	}
	handle("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	handle("GET /ui/{$}", u.page("overview"))
	handle("GET /ui/triggers/{name}", u.page("trigger"))
	handle("GET /ui/runs/{name}", u.page("run"))
	handle("GET "+assetsPrefix+"{hash}/{name...}", u.assets.serve)

	handle("GET /api/v3/status", u.handleStatus)
	handle("GET /api/v3/runs", u.handleRuns)
	handle("GET /api/v3/runs/{task}", u.handleRun)
	handle("GET /api/v3/triggers/{name}/series", u.handleSeries)
}

// pageData fills the page shell: which view its script renders, and for
// which trigger or run.
type pageData struct {
	Page, Name string
}

// page serves the shell; the script renders the view from the JSON
// endpoints. HTML is revalidated on every load (its asset links change
// with each build); the policy keeps every byte on this origin.
func (u *UI) page(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		if err := u.shell.Execute(&b, pageData{Page: kind, Name: r.PathValue("name")}); err != nil {
			u.log.Error("render status page", "err", err)
			http.Error(w, "render page", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		w.Write(b.Bytes())
	}
}
