package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// errSchemaShape is a schema message whose vectors claim more elements
// than its bytes hold, or whose fields nest past maxFieldDepth.
var errSchemaShape = errors.New("the schema message claims more than its bytes hold")

// maxFieldDepth bounds how deep fields may nest: ours never nest at all,
// and offsets that point back at a parent would otherwise recurse forever.
const maxFieldDepth = 16

// checkSchemaMessage walks the flatbuffer of the stream's first message
// (its schema) before the IPC reader does: the reader sizes its slices by
// the vector lengths written there, so a few garbled bytes made it
// allocate hundreds of gigabytes (found by FuzzDecodeRecord). Every
// vector must fit in the message, every field nest at most maxFieldDepth.
// A stream too short to hold a message is left to the reader to refuse.
func checkSchemaMessage(b []byte) (err error) {
	defer func() {
		if recover() != nil { // an offset out of the buffer
			err = errSchemaShape
		}
	}()
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
		b = b[4:] // the continuation marker
	}
	if len(b) < 8 {
		return nil
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n <= 0 || n > len(b)-4 {
		return nil
	}
	buf := b[4 : 4+n]
	msg := &flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}
	schema, ok := child(msg, 2) // Message.header
	if !ok {
		return nil
	}
	c := shapeCheck{buf: buf}
	if err := c.tables(schema, 1, 0); err != nil { // Schema.fields
		return err
	}
	return c.vector(schema, 2, 4) // Schema.custom_metadata
}

type shapeCheck struct {
	buf    []byte
	fields int
}

// tables checks the vector of Field tables at slot of t, and each field's
// children, to depth.
func (c *shapeCheck) tables(t *flatbuffers.Table, slot, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("%w: fields nest deeper than %d", errSchemaShape, maxFieldDepth)
	}
	if err := c.vector(t, slot, 4); err != nil {
		return err
	}
	o := flatbuffers.UOffsetT(t.Offset(vslot(slot)))
	if o == 0 {
		return nil
	}
	start, n := t.Vector(o), t.VectorLen(o)
	for i := range n {
		if c.fields++; c.fields > len(c.buf)/4 {
			return errSchemaShape
		}
		f := &flatbuffers.Table{Bytes: c.buf, Pos: t.Indirect(start + flatbuffers.UOffsetT(i*4))}
		if err := c.tables(f, 5, depth+1); err != nil { // Field.children
			return err
		}
		if err := c.vector(f, 6, 4); err != nil { // Field.custom_metadata
			return err
		}
	}
	return nil
}

// vector checks that the vector at slot of t, of elements of size bytes
// each, fits in the buffer.
func (c *shapeCheck) vector(t *flatbuffers.Table, slot, size int) error {
	o := flatbuffers.UOffsetT(t.Offset(vslot(slot)))
	if o == 0 {
		return nil
	}
	start, n := int(t.Vector(o)), t.VectorLen(o)
	if n < 0 || start > len(c.buf) || n > (len(c.buf)-start)/size {
		return fmt.Errorf("%w: a vector of %d elements in %d bytes", errSchemaShape, n, len(c.buf))
	}
	return nil
}

// child is the table at slot of t.
func child(t *flatbuffers.Table, slot int) (*flatbuffers.Table, bool) {
	o := flatbuffers.UOffsetT(t.Offset(vslot(slot)))
	if o == 0 {
		return nil, false
	}
	return &flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(o + t.Pos)}, true
}

// vslot is the vtable offset of a table's slot-th field.
func vslot(slot int) flatbuffers.VOffsetT { return flatbuffers.VOffsetT(4 + 2*slot) }
