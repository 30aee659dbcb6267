package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/regressd/regressd/httpjson"
)

// createRequest is the body of POST /api/v3/configure/processing_engine_trigger,
// shaped like InfluxDB 3's: trigger_arguments may be the comma-separated
// string or an object of strings.
type createRequest struct {
	DB       string          `json:"db"`
	Name     string          `json:"trigger_name"`
	Spec     string          `json:"trigger_specification"`
	Args     json.RawMessage `json:"trigger_arguments"`
	Disabled bool            `json:"disabled"`
	Plugin   string          `json:"plugin_filename"`
}

// readAdminBody reads an admin request's body, at most maxAdminBody bytes
// of valid UTF-8; otherwise it answers 413 or 400 and returns false.
func readAdminBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return nil, false
	}
	if err := httpjson.UTF8(body, 0); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return body, true
}

func (s *Scheduler) handleCreate(w http.ResponseWriter, r *http.Request) {
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	// encoding/json keeps the last of duplicate keys: a body that says two
	// things is refused, as the engine endpoint's is.
	var dups []string
	if d := duplicateKeys(body); len(d) > 0 {
		dups = d
	} else if obj, _ := bodyObject(body); obj != nil && len(obj["trigger_arguments"]) > 0 && obj["trigger_arguments"][0] == '{' {
		dups = duplicateKeys(obj["trigger_arguments"])
	}
	if len(dups) > 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("body key %q given twice", httpjson.Truncate(dups[0], maxEcho)))
		return
	}
	var req createRequest
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+httpjson.Truncate(err.Error(), maxEcho))
		return
	}
	args := map[string]string{}
	var err error
	if len(req.Args) > 0 && string(req.Args) != "null" {
		var str string
		if json.Unmarshal(req.Args, &str) == nil {
			if args, err = SplitArgs(str); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
		} else if err := json.Unmarshal(req.Args, &args); err != nil {
			writeError(w, http.StatusBadRequest, "trigger_arguments must be a \"k=v,k2=v2\" string or an object of strings")
			return
		}
	}
	t := Trigger{Name: req.Name, Spec: req.Spec, Args: args, Disabled: req.Disabled}
	if err := t.Validate(s.cfg.Models, s.cfg.ConfigDir); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Two triggers on one path: the engine endpoint would run one of them
	// and the other never.
	if ps, _ := ParseSpec(t.Spec); ps.Kind == SpecRequest {
		other, err := s.store.FindRequest(r.Context(), ps.Path)
		switch {
		case err == nil:
			writeError(w, http.StatusConflict, fmt.Sprintf("request path %q is already served by trigger %q; delete it first or pick another path", ps.Path, other.Name))
			return
		case !errors.Is(err, ErrTriggerNotFound):
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	if s.cfg.Tables != nil {
		expanded, _, _ := ExpandArgs(t.Args, s.cfg.ConfigDir) // read by Validate
		args, _ := ResolveArgs(expanded, true, s.cfg.Models)
		if args.Measurement != "" {
			if err := s.cfg.Tables(r.Context(), args); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
	}
	if err := s.store.Create(r.Context(), t); err != nil {
		if errors.Is(err, ErrTriggerExists) {
			writeError(w, http.StatusConflict, err.Error()+"; delete it first or pick another name")
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	t, _ = s.store.Get(r.Context(), t.Name)
	writeJSON(w, http.StatusCreated, t)
}

func (s *Scheduler) handleList(w http.ResponseWriter, r *http.Request) {
	if name := r.URL.Query().Get("trigger_name"); name != "" {
		r.SetPathValue("name", name)
		s.handleShow(w, r)
		return
	}
	ts, err := s.store.List(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if ts == nil {
		ts = []Trigger{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"triggers": ts})
}

func (s *Scheduler) handleShow(w http.ResponseWriter, r *http.Request) {
	t, err := s.store.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Scheduler) handleDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		name = r.URL.Query().Get("trigger_name")
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "trigger_name is required")
		return
	}
	if err := s.store.Delete(r.Context(), name); err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
}

// handleEnable takes the trigger's name as InfluxDB 3 does, as the query
// parameter trigger_name, or in a JSON body {"trigger_name": …} (with db,
// which is ignored as in the query); the two must not disagree.
func (s *Scheduler) handleEnable(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("trigger_name")
		body, ok := readAdminBody(w, r)
		if !ok {
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			var req struct {
				DB   string `json:"db"`
				Name string `json:"trigger_name"`
			}
			dec := json.NewDecoder(bytesReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, "body: "+httpjson.Truncate(err.Error(), maxEcho))
				return
			}
			if name != "" && req.Name != "" && name != req.Name {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("trigger_name is %q in the query and %q in the body; send one",
					httpjson.Truncate(name, maxEcho), httpjson.Truncate(req.Name, maxEcho)))
				return
			}
			if name == "" {
				name = req.Name
			}
		}
		if name == "" {
			writeError(w, http.StatusBadRequest, `trigger_name is required: as a query parameter (?trigger_name=…) or in the JSON body {"trigger_name": "…"}`)
			return
		}
		t, err := s.store.SetDisabled(r.Context(), name, disabled)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	}
}

func writeStoreError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrTriggerNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, fmt.Sprint(err))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": httpjson.Truncate(msg, maxMessage)})
}
