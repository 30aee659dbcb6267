package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// SizeList is a flag of comma-separated positive integers: a grid's
// rows, queries or features.
type SizeList struct{ v *[]int }

// Sizes is the flag that sets *v.
func Sizes(v *[]int) SizeList { return SizeList{v} }

func (f SizeList) String() string {
	if f.v == nil {
		return ""
	}
	s := make([]string, len(*f.v))
	for i, n := range *f.v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (f SizeList) Set(s string) error {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, n)
	}
	*f.v = out
	return nil
}
