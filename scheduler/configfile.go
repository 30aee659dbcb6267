package scheduler

// config_file_path: a trigger whose arguments come whole from a TOML file
// the operator keeps in a configuration directory, as the plugin's do.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/regressd/regressd/schemas"
)

// ArgConfigFile is the argument naming a TOML file that supplies every
// argument of a trigger.
const ArgConfigFile = "config_file_path"

// EnvConfigDir is the environment variable naming the directory config
// files are read from (the --config-dir flag's default).
const EnvConfigDir = "REGRESSD_CONFIG_DIR"

// maxConfigFile bounds the size of a config file.
const maxConfigFile = 1 << 20

// ExpandArgs returns a trigger's arguments: args as they are, or, when
// args is config_file_path alone, the arguments of the TOML file it names,
// read under dir (fromFile true). The file is read at every call, so an
// edit takes effect at the trigger's next run.
func ExpandArgs(args map[string]string, dir string) (out map[string]string, fromFile bool, err error) {
	path, ok := args[ArgConfigFile]
	if !ok {
		return args, false, nil
	}
	var inline []string
	for k := range args {
		if k != ArgConfigFile {
			inline = append(inline, k)
		}
	}
	if len(inline) > 0 {
		sort.Strings(inline)
		return nil, true, fmt.Errorf("%s supplies every argument, so it cannot be combined with the inline argument(s) %s: move them into the TOML file, or drop %s",
			ArgConfigFile, strings.Join(inline, ", "), ArgConfigFile)
	}
	out, err = ReadConfigFile(dir, path)
	return out, true, err
}

// ReadConfigFile reads a TOML file of trigger arguments at path, relative
// to dir and never outside it (symbolic links included), into the
// arguments' string form. A list of feature_fields whose names hold white
// space is kept as a JSON list; tags may be a table.
func ReadConfigFile(dir, path string) (map[string]string, error) {
	path = strings.TrimSpace(path)
	switch {
	case path == "":
		return nil, fmt.Errorf("%s is empty", ArgConfigFile)
	case dir == "":
		return nil, fmt.Errorf("%s %q: no configuration directory is set: start regressd with --config-dir (or %s) naming the directory that holds it", ArgConfigFile, path, EnvConfigDir)
	case filepath.IsAbs(path) || !filepath.IsLocal(path):
		return nil, fmt.Errorf("%s %q must be a relative path inside the configuration directory", ArgConfigFile, path)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %q: the configuration directory cannot be opened: %w", ArgConfigFile, path, err)
	}
	defer root.Close()
	f, err := root.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s %q: no such file in the configuration directory", ArgConfigFile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", ArgConfigFile, path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", ArgConfigFile, path, err)
	}
	if len(b) > maxConfigFile {
		return nil, fmt.Errorf("%s %q: larger than %d bytes", ArgConfigFile, path, maxConfigFile)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(b), &raw); err != nil {
		return nil, fmt.Errorf("%s %q is not valid TOML: %w", ArgConfigFile, path, err)
	}
	out := make(map[string]string, len(raw))
	var errs []error
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == ArgConfigFile {
			errs = append(errs, fmt.Errorf("%s %q: %s cannot name another file", ArgConfigFile, path, ArgConfigFile))
			continue
		}
		v, err := tomlArg(k, raw[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", ArgConfigFile, path, err))
			continue
		}
		out[k] = v
	}
	return out, errors.Join(errs...)
}

// tomlArg is a TOML value in the arguments' string form.
func tomlArg(k string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case time.Time:
		// A local date-time (no offset) decodes in a zone of offset 0:
		// UTC, as a time without a zone reads everywhere else.
		return v.Format(time.RFC3339Nano), nil
	case []any:
		if s, ok, err := tomlListArg(k, v); ok {
			return s, err
		}
		if k != "feature_fields" {
			break
		}
		names := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return "", errors.New("feature_fields must be a list of strings")
			}
			names[i] = s
		}
		return FeatureList(names), nil
	case map[string]any:
		if k != "tags" {
			break
		}
		tags := make(map[string]string, len(v))
		for tk, tv := range v {
			s, ok := tv.(string)
			if !ok {
				return "", fmt.Errorf("tags.%s must be a string", tk)
			}
			tags[tk] = s
		}
		return schemas.FormatTags(tags), nil
	}
	return "", fmt.Errorf("%s: a %T is not a value this argument takes", k, v)
}

// FeatureList is a list of feature names in the argument's string form:
// space-separated, or a JSON list when a name holds white space (a form
// only a config file or a request body can give).
func FeatureList(names []string) string {
	for _, n := range names {
		if strings.ContainsAny(n, " \t\n\r") || strings.HasPrefix(n, "[") {
			b, _ := json.Marshal(names)
			return string(b)
		}
	}
	return strings.Join(names, " ")
}
