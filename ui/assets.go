package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// files are the page's assets, built into the binary: no CDN, no build
// step at run time. uPlot is vendored unchanged from the npm registry (see
// assets/vendor/uplot/README.md).
//
//go:embed assets/index.html assets/app.js assets/app.css
//go:embed assets/vendor/uplot/uPlot.iife.min.js assets/vendor/uplot/uPlot.min.css assets/vendor/uplot/LICENSE
var files embed.FS

// assetsPrefix is where assets are served: /ui/assets/<hash>/<name>.
const assetsPrefix = "/ui/assets/"

// asset is one embedded file with its content hash.
type asset struct {
	body  []byte
	hash  string // first 12 hex digits of its SHA-256
	ctype string
}

// assets are the embedded files by name (relative to assets/), read once.
type assets map[string]*asset

func loadAssets() (assets, error) {
	out := assets{}
	err := fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "text/plain; charset=utf-8" // LICENSE
		}
		out[strings.TrimPrefix(p, "assets/")] = &asset{body: b, hash: hex.EncodeToString(sum[:6]), ctype: ctype}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load page assets: %w", err)
	}
	return out, nil
}

// url is the asset's address; its hash changes with its content, so it may
// be cached for good.
func (a assets) url(name string) (string, error) {
	f, ok := a[name]
	if !ok {
		return "", fmt.Errorf("no asset %q", name)
	}
	return assetsPrefix + f.hash + "/" + name, nil
}

// serve answers GET /ui/assets/{hash}/{name...}. The current hash is
// cached as immutable; any other (a page from before an upgrade) gets the
// current file revalidated every time. Both carry an ETag, so a browser
// that has the file gets 304.
func (a assets) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, ok := a[name]
	if !ok || name == "index.html" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+f.hash+`"`)
	if r.PathValue("hash") == f.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
