package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls a running regressd's admin API and engine endpoint, as
// 'regressd trigger' and 'regressd demo' do.
type Client struct {
	// Server is the API's base URL (http://127.0.0.1:8181).
	Server string
	// Token is the Bearer token of a server with REGRESSD_AUTH_TOKENS.
	Token string
	// HTTP sends the requests; nil uses a client with a 30-second timeout
	// for the admin API and none for the engine endpoint.
	HTTP *http.Client
}

// triggersPath is the admin API's trigger collection.
const triggersPath = "/api/v3/configure/processing_engine_trigger"

// CreateTrigger stores a trigger; args is the comma-separated key=value list.
func (c *Client) CreateTrigger(ctx context.Context, name, spec, args string, disabled bool) (Trigger, error) {
	var t Trigger
	body := map[string]any{"trigger_name": name, "trigger_specification": spec, "trigger_arguments": args, "disabled": disabled}
	err := c.call(ctx, http.MethodPost, triggersPath, body, &t)
	return t, err
}

// Triggers lists every trigger.
func (c *Client) Triggers(ctx context.Context) ([]Trigger, error) {
	var out struct{ Triggers []Trigger }
	err := c.call(ctx, http.MethodGet, triggersPath, nil, &out)
	return out.Triggers, err
}

// Trigger reads one trigger.
func (c *Client) Trigger(ctx context.Context, name string) (Trigger, error) {
	var t Trigger
	err := c.call(ctx, http.MethodGet, triggersPath+"/"+url.PathEscape(name), nil, &t)
	return t, err
}

// DeleteTrigger deletes a trigger.
func (c *Client) DeleteTrigger(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, triggersPath+"?trigger_name="+url.QueryEscape(name), nil, nil)
}

// SetDisabled disables or enables a trigger.
func (c *Client) SetDisabled(ctx context.Context, name string, disabled bool) error {
	action := map[bool]string{true: "disable", false: "enable"}[disabled]
	return c.call(ctx, http.MethodPost, triggersPath+"/"+action+"?trigger_name="+url.QueryEscape(name), nil, nil)
}

// RunTrigger calls the engine endpoint of a request trigger's path with
// the model-service key and a JSON body, and returns the HTTP status and
// the answer as sent.
func (c *Client) RunTrigger(ctx context.Context, path, serviceKey string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := c.request(ctx, http.MethodPost, "/api/v3/engine/"+url.PathEscape(path), bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(HeaderServiceKey, serviceKey)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach regressd at %s: %w", c.Server, err)
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, MaxEngineBody))
	return res.StatusCode, answer, err
}

// URL is Server as a base URL: host:port alone (as a listen address is
// written) means http://host:port.
func (c *Client) URL() string {
	s := strings.TrimRight(strings.TrimSpace(c.Server), "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return s
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL()+path, body)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", c.Server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// call sends a JSON request to the admin API and decodes the answer into
// out; an error answer is an error saying what the server said.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach regressd at %s: %w (is 'regressd run' running? set --server)", c.Server, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if res.StatusCode >= http.StatusMultipleChoices {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		json.Unmarshal(data, &e)
		// regressd answers "error"; a gateway answers both, often the same text.
		msg := e.Error
		if e.Message != "" && e.Message != msg {
			msg = strings.TrimPrefix(msg+": "+e.Message, ": ")
		}
		if msg == "" {
			msg = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("%s (HTTP %d)", msg, res.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
	}
	return nil
}
