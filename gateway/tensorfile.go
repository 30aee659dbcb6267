package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// The official client's compact binary request for large tables: a 64 KiB
// header — the magic NORI_REQ, a little-endian uint32 length, that many
// bytes of JSON {format, metadata, tensors}, zero padding — then the raw
// little-endian arrays at the offsets the header gives.
const (
	TensorfileContentType = "application/vnd.synthefy.nori.tensorfile"
	tensorfileFormat      = "synthefy-nori-request-v1"
	tensorfileMagic       = "NORI_REQ"
	tensorfileHeaderBytes = 64 << 10
)

// tensorSpec is one array's entry in the header.
type tensorSpec struct {
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	NBytes int64   `json:"nbytes"`
}

// tensorDTypes are the arrays of a request and their element types.
var tensorDTypes = map[string]string{"X_train": "<f4", "y_train": "<f8", "X_test": "<f4"}

// metadataFields are the metadata keys read; the large-context fields are
// accepted here as in the JSON body.
var metadataFields = []string{"model", "task", "output_type", "quantiles", "memory_policy",
	"large_context_policy", "large_context_threshold", "large_context_seed"}

// decodeTensorfile reads a binary request. The header is checked whole,
// and the arrays' sizes against budget, before any array is read; the
// arrays are then read in offset order, straight into the matrices.
func decodeTensorfile(r io.Reader, budget cellBudget) (*predictRequest, error) {
	head := make([]byte, tensorfileHeaderBytes)
	if _, err := io.ReadFull(r, head); err != nil {
		if bad := jsonProblem(err); isTooLarge(bad) {
			return nil, bad
		}
		return nil, invalid("the tensorfile ends inside its %d-byte header", tensorfileHeaderBytes)
	}
	if string(head[:8]) != tensorfileMagic {
		return nil, invalid("the body is not a tensorfile: it does not start with %q", tensorfileMagic)
	}
	n := int(binary.LittleEndian.Uint32(head[8:12]))
	if n > tensorfileHeaderBytes-12 {
		return nil, invalid("the tensorfile header claims %d bytes of JSON, over the %d it can hold", n, tensorfileHeaderBytes-12)
	}
	raw := head[12 : 12+n]
	if err := noDuplicateKeys(raw, "the tensorfile header"); err != nil {
		return nil, err
	}
	var hdr struct {
		Format   string                     `json:"format"`
		Metadata map[string]json.RawMessage `json:"metadata"`
		Tensors  map[string]tensorSpec      `json:"tensors"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		return nil, invalid("the tensorfile header is not {format, metadata, tensors}: %v", err)
	}
	if hdr.Format != tensorfileFormat {
		return nil, invalid("tensorfile format %q is not %q", truncate(hdr.Format, 64), tensorfileFormat)
	}
	req := &predictRequest{}
	var unknown []string
	for k, v := range hdr.Metadata {
		if !slices.Contains(metadataFields, k) {
			unknown = append(unknown, k)
			continue
		}
		if err := req.small(v, k); err != nil {
			return nil, err
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, invalid("unknown metadata field(s) %s; the tensorfile metadata takes %s", quoteList(unknown), strings.Join(metadataFields, ", "))
	}
	specs, err := checkTensors(hdr.Tensors, budget)
	if err != nil {
		return nil, err
	}
	at := int64(tensorfileHeaderBytes)
	for _, s := range specs {
		if s.spec.Offset < at {
			return nil, invalid("tensor %s at offset %d overlaps what comes before it (which ends at %d)", s.name, s.spec.Offset, at)
		}
		if _, err := io.CopyN(io.Discard, r, s.spec.Offset-at); err != nil {
			return nil, cutShort(err, s.name)
		}
		if err := req.readTensor(r, s.name, s.spec); err != nil {
			return nil, err
		}
		at = s.spec.Offset + s.spec.NBytes
	}
	if n, _ := io.ReadFull(r, make([]byte, 1)); n > 0 {
		return nil, invalid("the tensorfile has bytes after its last tensor")
	}
	return req, req.checkShapes()
}

type namedSpec struct {
	name string
	spec tensorSpec
}

// checkTensors checks every array's entry and reserves its cells; it
// returns them in offset order.
func checkTensors(t map[string]tensorSpec, budget cellBudget) ([]namedSpec, error) {
	var out []namedSpec
	var probs []string
	for name, s := range t {
		want, ok := tensorDTypes[name]
		if !ok {
			probs = append(probs, fmt.Sprintf("unknown tensor %q (the tensors are X_train, y_train, X_test)", truncate(name, 64)))
			continue
		}
		if s.DType != want {
			probs = append(probs, fmt.Sprintf("%s has dtype %q, want %q", name, truncate(s.DType, 16), want))
			continue
		}
		dims := 2
		if name == "y_train" {
			dims = 1
		}
		if len(s.Shape) != dims || slices.ContainsFunc(s.Shape, func(d int64) bool { return d < 0 || d > math.MaxInt32 }) {
			probs = append(probs, fmt.Sprintf("%s has shape %v, want %d non-negative dimensions", name, s.Shape, dims))
			continue
		}
		size := int64(4)
		if name == "y_train" {
			size = 8
		}
		cells := s.Shape[0]
		if dims == 2 {
			cells *= s.Shape[1]
		}
		if s.NBytes != cells*size {
			probs = append(probs, fmt.Sprintf("%s has nbytes %d, want %d for shape %v", name, s.NBytes, cells*size, s.Shape))
			continue
		}
		out = append(out, namedSpec{name, s})
	}
	for name := range tensorDTypes {
		if _, ok := t[name]; !ok {
			probs = append(probs, name+" is required")
		}
	}
	if probs != nil {
		sort.Strings(probs)
		return nil, invalid("tensorfile: %s", strings.Join(probs, "; "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Offset < out[j].spec.Offset })
	for _, s := range out {
		rows, width, cells := int64(0), 0, s.spec.Shape[0]
		if len(s.spec.Shape) == 2 {
			rows, width = s.spec.Shape[0], int(s.spec.Shape[1])
			cells *= s.spec.Shape[1]
		}
		if err := budget.take(s.name, rows, width, cells); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readTensor reads one array into req, NaN being a missing feature value.
func (req *predictRequest) readTensor(r io.Reader, name string, s tensorSpec) error {
	buf := make([]byte, s.NBytes)
	if _, err := io.ReadFull(r, buf); err != nil {
		return cutShort(err, name)
	}
	if name == "y_train" {
		y := make([]float64, s.Shape[0])
		for i := range y {
			v := math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return invalid("y_train[%d] is not a finite number: every context row needs a target (leave rows without one out)", i)
			}
			y[i] = v
		}
		req.Y = y
		req.NonNull += int64(len(y))
		return nil
	}
	rows, width := int(s.Shape[0]), int(s.Shape[1])
	if rows > 0 && width == 0 {
		return invalid("%s row 0 is empty: every row needs at least one feature", name)
	}
	slab := make([]float64, rows*width)
	m := make([][]float64, rows)
	for i := range m {
		m[i] = slab[i*width : (i+1)*width : (i+1)*width]
		for j := range width {
			v := float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(i*width+j):])))
			if math.IsInf(v, 0) {
				return invalid("%s row %d, column %d: %v is not a finite number", name, i, j, v)
			}
			if !math.IsNaN(v) {
				req.NonNull++
			}
			m[i][j] = v
		}
	}
	if name == "X_train" {
		req.X = m
	} else {
		req.Xq = m
	}
	return nil
}

func cutShort(err error, name string) error {
	if bad := jsonProblem(err); isTooLarge(bad) {
		return bad
	}
	return invalid("the tensorfile ends inside or before tensor %s", name)
}

func isTooLarge(err error) bool {
	var br *badRequest
	return errors.As(err, &br) && br.status == 413
}
