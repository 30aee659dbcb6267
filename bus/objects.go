package bus

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Objects is an object store whose per-task objects can be forgotten
// without a trace. ObjectStore.Delete leaves a delete marker on the
// object's meta subject until the bucket's TTL: one message and one entry
// of the server's per-subject index per task, which grows with the rate of
// tasks for a whole TTL. Forget purges both the chunks and the meta subject
// of the bucket's stream instead (subject names as in ADR-20).
type Objects struct {
	jetstream.ObjectStore
	bucket string
	stream jetstream.Stream
}

// OpenObjects binds an existing object store and its stream.
func OpenObjects(ctx context.Context, js jetstream.JetStream, bucket string) (*Objects, error) {
	obj, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", bucket, err)
	}
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", bucket, err)
	}
	return &Objects{ObjectStore: obj, bucket: bucket, stream: st}, nil
}

// Forget removes the named object and its meta message; an object that is
// not there is already forgotten.
func (o *Objects) Forget(ctx context.Context, name string) error {
	info, err := o.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("forget object %s: %w", name, err)
	}
	return o.ForgetInfo(ctx, info)
}

// ForgetInfo is Forget for an object whose info the caller holds (from its
// Put or Get), one round trip fewer.
func (o *Objects) ForgetInfo(ctx context.Context, info *jetstream.ObjectInfo) error {
	meta := fmt.Sprintf("$O.%s.M.%s", o.bucket, base64.URLEncoding.EncodeToString([]byte(info.Name)))
	if err := o.stream.Purge(ctx, jetstream.WithPurgeSubject(meta)); err != nil {
		return fmt.Errorf("forget object %s: %w", info.Name, err)
	}
	if info.NUID == "" {
		return nil
	}
	if err := o.stream.Purge(ctx, jetstream.WithPurgeSubject(o.chunks(info.NUID))); err != nil {
		return fmt.Errorf("forget object %s: %w", info.Name, err)
	}
	return nil
}

// GetChunk reads the body of an object stored in one chunk (its info's
// Chunks is 1) by the NUID of its chunks: one request, where Get looks the
// object up and then runs a consumer over its chunks. The caller checks the
// body against what it expects (a digest), as Get would.
func (o *Objects) GetChunk(ctx context.Context, nuid string) ([]byte, error) {
	m, err := o.stream.GetLastMsgForSubject(ctx, o.chunks(nuid))
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// chunks is the subject of an object's chunks (ADR-20).
func (o *Objects) chunks(nuid string) string { return fmt.Sprintf("$O.%s.C.%s", o.bucket, nuid) }
