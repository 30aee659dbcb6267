package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/robfig/cron/v3"

	"github.com/regressd/regressd/httpjson"
	"github.com/regressd/regressd/schemas"
)

// Errors of the trigger registry.
var (
	ErrTriggerNotFound = errors.New("trigger not found")
	ErrTriggerExists   = errors.New("trigger already exists")
)

// Trigger is a stored trigger definition.
type Trigger struct {
	Name string `json:"trigger_name"`
	// Spec is request:<path>, every:<duration> or cron:<expr>.
	Spec     string            `json:"trigger_specification"`
	Args     map[string]string `json:"trigger_arguments"`
	Disabled bool              `json:"disabled"`
	Created  time.Time         `json:"created"`
	Updated  time.Time         `json:"updated"`
}

// Spec kinds.
const (
	SpecRequest = "request"
	SpecEvery   = "every"
	SpecCron    = "cron"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// cronParser accepts 5 fields, or 6 with seconds first, and @descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// TableCheck reports what is wrong with the table a trigger's (partial)
// arguments name: a missing table, a non-numeric column, a bad tag filter.
type TableCheck func(ctx context.Context, args schemas.RunArgs) error

// ParsedSpec is a trigger spec taken apart.
type ParsedSpec struct {
	Kind     string
	Path     string        // request
	Schedule cron.Schedule // every, cron
}

// ParseSpec parses request:<path>, every:<duration> or cron:<expr>.
func ParseSpec(spec string) (ParsedSpec, error) {
	kind, rest, ok := strings.Cut(strings.TrimSpace(spec), ":")
	rest = strings.TrimSpace(rest)
	if !ok || rest == "" {
		return ParsedSpec{}, fmt.Errorf("trigger spec %q: want request:<name>, every:<duration> (e.g. every:15m) or cron:<expr>", httpjson.Truncate(spec, maxEcho))
	}
	switch kind {
	case SpecRequest:
		if !nameRE.MatchString(rest) {
			return ParsedSpec{}, fmt.Errorf("trigger spec %q: the request path may hold only letters, digits, '_' and '-'", httpjson.Truncate(spec, maxEcho))
		}
		return ParsedSpec{Kind: kind, Path: rest}, nil
	case SpecEvery:
		d, err := schemas.ParseDuration(rest)
		if err != nil {
			return ParsedSpec{}, fmt.Errorf("trigger spec %q: %w", httpjson.Truncate(spec, maxEcho), err)
		}
		if time.Duration(d) < time.Second {
			return ParsedSpec{}, fmt.Errorf("trigger spec %q: the interval must be at least 1s", spec)
		}
		return ParsedSpec{Kind: kind, Schedule: everySchedule{time.Duration(d)}}, nil
	case SpecCron:
		sch, err := cronParser.Parse(rest)
		if err != nil {
			return ParsedSpec{}, fmt.Errorf("trigger spec %q: %w", httpjson.Truncate(spec, maxEcho), err)
		}
		if cd, ok := sch.(cron.ConstantDelaySchedule); ok {
			sch = everySchedule{cd.Delay} // @every aligns as every: does
		}
		return ParsedSpec{Kind: kind, Schedule: sch}, nil
	}
	return ParsedSpec{}, fmt.Errorf("trigger spec %q: unknown kind %q (want request, every or cron)", httpjson.Truncate(spec, maxEcho), httpjson.Truncate(kind, maxEcho))
}

// Validate checks the name, spec and arguments (those of its config file,
// read under configDir, when it names one), all problems at once.
func (t Trigger) Validate(models ModelCheck, configDir string) error {
	var errs []error
	if !nameRE.MatchString(t.Name) {
		errs = append(errs, fmt.Errorf("trigger name %q: use 1-64 letters, digits, '_' or '-'", httpjson.Truncate(t.Name, maxEcho)))
	}
	ps, err := ParseSpec(t.Spec)
	if err != nil {
		errs = append(errs, err)
	} else if ps.Kind == SpecCron && ps.Schedule.Next(time.Now()).IsZero() {
		// cron's Next looks five years ahead: "0 0 30 2 *" finds nothing.
		errs = append(errs, fmt.Errorf("trigger spec %q never fires: no time within 5 years matches it", t.Spec))
	}
	// A request trigger may leave table and columns to the request body,
	// unless a config file gives its arguments: no body may come then.
	args, fromFile, err := ExpandArgs(t.Args, configDir)
	if err != nil {
		errs = append(errs, err)
	} else if _, err := ResolveArgs(args, ps.Kind == SpecRequest && !fromFile, models); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Store keeps triggers in the regress_triggers bucket.
type Store struct {
	kv jetstream.KeyValue
}

// OpenStore binds the trigger bucket, which bus.Ensure creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, schemas.BucketTriggers)
	if err != nil {
		return nil, fmt.Errorf("open trigger bucket: %w", err)
	}
	return &Store{kv: kv}, nil
}

// Create stores a new trigger; ErrTriggerExists if the name is taken.
func (s *Store) Create(ctx context.Context, t Trigger) error {
	now := time.Now().UTC()
	t.Created, t.Updated = now, now
	b, _ := json.Marshal(t)
	if _, err := s.kv.Create(ctx, t.Name, b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: %q", ErrTriggerExists, t.Name)
		}
		return fmt.Errorf("store trigger: %w", err)
	}
	return nil
}

// Get returns one trigger.
func (s *Store) Get(ctx context.Context, name string) (Trigger, error) {
	if !nameRE.MatchString(name) {
		return Trigger{}, fmt.Errorf("%w: %q", ErrTriggerNotFound, httpjson.Truncate(name, maxEcho))
	}
	e, err := s.kv.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return Trigger{}, fmt.Errorf("%w: %q", ErrTriggerNotFound, name)
		}
		return Trigger{}, fmt.Errorf("read trigger: %w", err)
	}
	var t Trigger
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return Trigger{}, fmt.Errorf("read trigger %q: %w", name, err)
	}
	return t, nil
}

// List returns every trigger, by name.
func (s *Store) List(ctx context.Context) ([]Trigger, error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	var names []string
	for k := range lister.Keys() {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]Trigger, 0, len(names))
	for _, n := range names {
		t, err := s.Get(ctx, n)
		if errors.Is(err, ErrTriggerNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// SetDisabled enables or disables a trigger.
func (s *Store) SetDisabled(ctx context.Context, name string, disabled bool) (Trigger, error) {
	if !nameRE.MatchString(name) {
		// Not a key the bucket could hold ("*", "a.b"): no such trigger,
		// not a server error.
		return Trigger{}, fmt.Errorf("%w: %q", ErrTriggerNotFound, httpjson.Truncate(name, maxEcho))
	}
	for {
		e, err := s.kv.Get(ctx, name)
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return Trigger{}, fmt.Errorf("%w: %q", ErrTriggerNotFound, name)
			}
			return Trigger{}, err
		}
		var t Trigger
		if err := json.Unmarshal(e.Value(), &t); err != nil {
			return Trigger{}, err
		}
		t.Disabled, t.Updated = disabled, time.Now().UTC()
		b, _ := json.Marshal(t)
		if _, err := s.kv.Update(ctx, name, b, e.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // raced with another update: read again
			}
			return Trigger{}, err
		}
		return t, nil
	}
}

// Delete removes a trigger.
func (s *Store) Delete(ctx context.Context, name string) error {
	if _, err := s.Get(ctx, name); err != nil {
		return err
	}
	return s.kv.Delete(ctx, name)
}

// FindRequest returns the enabled-or-not request trigger serving path.
func (s *Store) FindRequest(ctx context.Context, path string) (Trigger, error) {
	if t, err := s.Get(ctx, path); err == nil {
		if ps, _ := ParseSpec(t.Spec); ps.Kind == SpecRequest && ps.Path == path {
			return t, nil
		}
	}
	all, err := s.List(ctx)
	if err != nil {
		return Trigger{}, err
	}
	for _, t := range all {
		if ps, _ := ParseSpec(t.Spec); ps.Kind == SpecRequest && ps.Path == path {
			return t, nil
		}
	}
	return Trigger{}, fmt.Errorf("%w: no request trigger serves %q", ErrTriggerNotFound, httpjson.Truncate(path, maxEcho))
}

// Watch returns the bucket's watcher for schedule updates.
func (s *Store) Watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	return s.kv.WatchAll(ctx)
}
