package schemas

import (
	"sort"
	"strings"
)

// tagEscaper percent-escapes what the "k:v k2:v2" form of a trigger's tags
// argument cannot hold.
var tagEscaper = strings.NewReplacer("%", "%25", " ", "%20", "\t", "%09", "\n", "%0A", "\r", "%0D", ":", "%3A", ",", "%2C")

// FormatTags writes tags as the tags argument reads them, "k:v k2:v2",
// keys sorted and escaped so that any value reads back as it was.
func FormatTags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = tagEscaper.Replace(k) + ":" + tagEscaper.Replace(tags[k])
	}
	return strings.Join(parts, " ")
}
