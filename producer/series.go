package producer

// Many series in one run (group_by). The window is read once; its rows are
// split by the values of the group_by columns, and every series becomes a
// task of its own (schemas.SeriesTaskID), with its own context, queries,
// min_history, caps, skip_existing lookup and tags, planned and stored as
// a single-series task is; small ones travel together in packs (pack.go).
// The run's task is their parent: the writer settles it once every series
// has ended. The parent is announced to the writer (StatusSeries) before
// any series is published.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// seriesPlan is one series of a group_by run: its rows of the window
// (every feature present, oldest first) and what planning made of them.
type seriesPlan struct {
	key     string // its group_by tags as FormatTags writes them
	tags    map[string]string
	rows    []int
	meta    schemas.TaskMeta
	verdict *verdict
	ex, qs  []int
}

// planSeries plans a group_by run over its window w.
func (p *Producer) planSeries(ctx context.Context, job schemas.Job, meta *schemas.TaskMeta, w window, log *slog.Logger) error {
	a := job.Args
	for _, c := range a.GroupBy {
		if !containsString(meta.TagColumns, c) {
			return &verdict{schemas.StatusFailed, http.StatusBadRequest, fmt.Sprintf("group_by: %q is not a tag column of %q (tag columns: %s)",
				c, a.Measurement, strings.Join(meta.TagColumns, ", "))}
		}
	}
	series, err := w.splitSeries(meta.TagColumns, a.GroupBy)
	if err != nil {
		return &verdict{schemas.StatusFailed, http.StatusBadRequest, err.Error()}
	}
	if len(series) == 0 {
		return &verdict{schemas.StatusSkipped, http.StatusOK, "no rows to predict in the window (no row has every feature present)"}
	}
	var existing map[string]map[int64]struct{}
	if a.SkipExisting {
		existing, err = p.db.ExistingBySeries(ctx, tsdb.Series{Measurement: a.Measurement, Target: a.Field,
			Table: a.OutputMeasurement, Schema: a.OutputSchema, TagColumns: meta.TagColumns}, job.Start, job.End)
		if err != nil {
			return err
		}
	}
	budget := a.MaxRunPredictRows
	if budget <= 0 {
		budget = schemas.DefaultMaxRunPredictRows
	}
	var cut []string
	cutRows := 0
	for _, s := range series {
		m := *meta
		m.TaskID, m.Parent, m.Series = schemas.SeriesTaskID(meta.TaskID, s.key), meta.TaskID, s.tags
		m.ReadRows, m.ReadTruncated = len(s.rows), false
		examples, queries := w.splitRows(s.rows)
		queries, dup := w.distinctTimes(queries)
		if dup > 0 {
			log.Warn("rows to predict share a time: one prediction per series and time", "series", s.key, "rows_dropped", dup)
		}
		if had := existing[tsdb.SeriesKey(meta.TagColumns, s.tags)]; len(had) > 0 && len(queries) > 0 {
			queries, m.SkippedExists = w.dropExisting(queries, had)
			p.cfg.Metrics.AddRows(metrics.RowsSkippedExisting, m.SkippedExists)
		}
		if len(queries) > a.MaxPredictRows {
			m.DroppedQueries = len(queries) - a.MaxPredictRows
			queries = newest(queries, a.MaxPredictRows)
		}
		examples = newest(examples, a.MaxTrainRows)
		if len(examples) >= a.MinHistory && len(queries) > budget {
			// The run-wide cap: the series past it keep their newest rows,
			// or none.
			cut = append(cut, s.key)
			cutRows += len(queries) - budget
			m.DroppedQueries += len(queries) - budget
			queries = newest(queries, budget)
		}
		m.ContextRows, m.QueryRows = len(examples), len(queries)
		if len(examples) >= a.MinHistory && len(queries) == 0 && m.DroppedQueries > 0 {
			s.verdict = &verdict{schemas.StatusSkipped, http.StatusOK, fmt.Sprintf("max_run_predict_rows=%d was spent on earlier series: none of its %d rows to predict was", a.MaxRunPredictRows, m.DroppedQueries)}
		} else {
			s.verdict = skipVerdict(len(examples), a.MinHistory, len(queries), m.SkippedExists, "")
		}
		if s.verdict == nil {
			budget -= len(queries)
		}
		s.meta, s.ex, s.qs = m, examples, queries
	}
	note := ""
	if len(cut) > 0 {
		shown := cut[:min(5, len(cut))]
		note = fmt.Sprintf("max_run_predict_rows=%d cut %d series (%s%s): %d rows not predicted", a.MaxRunPredictRows, len(cut),
			strings.Join(shown, "; "), map[bool]string{true: "; …", false: ""}[len(cut) > 5], cutRows)
		log.Warn("run cut by max_run_predict_rows", "series_cut", len(cut), "rows_cut", cutRows)
	}
	meta.SeriesTotal = len(series)
	if ctx, err = p.markSeriesPlanned(ctx, meta.TaskID); err != nil {
		return err
	}
	if err := p.announce(ctx, *meta, note); err != nil {
		return err
	}
	log.Info("group_by run planned", "series", len(series), "read_rows", meta.ReadRows)
	// Small series (and those that end here) travel in packs (pack.go);
	// the others are planned a few at a time: each stores its context and
	// waits for its batches' acknowledgements. A job delivered again
	// publishes a series' stored plan, if it has one, whatever its size.
	began := time.Now()
	none, _ := ctx.Value(noStoredPlansKey{}).(bool)
	pk := &packer{p: p, trigger: job.Trigger, parent: meta.TaskID, w: w, max: packSeries(len(series))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(seriesInFlight)
	lone := 0
	perr := func() error {
		for _, s := range series {
			if packable(s, a.PredictBatchSize, len(a.FeatureFields)) {
				stored := false
				if !none {
					st, _, ok, err := p.storedPlan(gctx, s.meta.TaskID)
					if err != nil {
						return err
					}
					stored = ok && st.Batches > 0
				}
				if !stored {
					if err := pk.add(gctx, s); err != nil {
						return err
					}
					continue
				}
			}
			lone++
			g.Go(func() error { return p.planOneSeries(gctx, job, w, s, log) })
		}
		return nil
	}()
	if perr == nil {
		perr = pk.wait(gctx)
	} else {
		pk.g.Wait() // the packs already started; the job is tried again
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	log.Info("group_by run published", "series", len(series), "packs", pk.packs, "series_alone", lone,
		"took", time.Since(began).Round(time.Millisecond))
	return nil
}

// announce tells the writer the parent task's series count (note: what
// max_run_predict_rows cut).
func (p *Producer) announce(ctx context.Context, meta schemas.TaskMeta, note string) error {
	meta.Batches = 0
	m, err := schemas.NewResultMsg(schemas.Result{Meta: meta, Batch: schemas.VerdictBatch, Status: schemas.StatusSeries, Message: note})
	if err != nil {
		return err
	}
	p.cfg.Tracing.InjectMsg(ctx, m)
	if _, err := p.js.PublishMsg(ctx, m, jetstream.WithMsgID(meta.TaskID+":series")); err != nil {
		return fmt.Errorf("announce series: %w", err)
	}
	return nil
}

// planOneSeries plans one series as a task of its own, or publishes its
// stored plan again when an earlier delivery of the job stored one.
func (p *Producer) planOneSeries(ctx context.Context, job schemas.Job, w window, s *seriesPlan, log *slog.Logger) error {
	m := s.meta
	log = log.With("series_task", m.TaskID)
	var stored schemas.TaskMeta
	var times [][]int64
	var ok bool
	if none, _ := ctx.Value(noStoredPlansKey{}).(bool); !none {
		var err error
		if stored, times, ok, err = p.storedPlan(ctx, m.TaskID); err != nil {
			return err
		}
	}
	if ok && stored.Batches > 0 {
		at := make(map[int64]int, len(s.rows))
		for _, i := range s.rows {
			at[int64(w.times.Value(i))] = i
		}
		batches := make([][]int, len(times))
		for b, ts := range times {
			for _, t := range ts {
				if i, ok := at[t]; ok {
					batches[b] = append(batches[b], i)
				}
			}
		}
		hdr, err := schemas.EncodeTaskMeta(stored)
		if err != nil {
			return err
		}
		log.Info("job delivered again: publishing the series' stored plan", "batches", stored.Batches)
		return p.publishBatches(ctx, stored, hdr, w, batches)
	}
	if s.verdict != nil {
		return p.publishVerdict(ctx, m, s.verdict, "verdict")
	}
	ctxRec := w.contextRecord(m.Features, s.ex)
	body, err := schemas.EncodeRecord(ctxRec)
	ctxRec.Release()
	if err != nil {
		return err
	}
	m.ContextDigest = schemas.ContextDigest(body)
	batches := cut(s.qs, job.Args.PredictBatchSize)
	m.Batches = len(batches)
	hdr, err := schemas.EncodeTaskMeta(m)
	if err != nil {
		return err
	}
	if len(hdr) > maxTaskHeader {
		return p.publishVerdict(ctx, m, &verdict{schemas.StatusFailed, http.StatusBadRequest, fmt.Sprintf("the series' description is %d bytes, over the %d a NATS header may carry: name fewer feature fields or tags, or send a shorter model-service key", len(hdr), maxTaskHeader)}, "verdict")
	}
	info, err := p.storeContext(ctx, m.TaskID, body, hdr, encodePlan(w, batches))
	if err != nil {
		return err
	}
	m.ContextNUID, m.ContextChunks = info.NUID, int(info.Chunks)
	if hdr, err = schemas.EncodeTaskMeta(m); err != nil {
		return err
	}
	return p.publishBatches(ctx, m, hdr, w, batches)
}

// splitSeries groups the rows the run would use (every feature present) by
// their group_by values, in the order of their keys. Tags outside group_by
// must hold one value (or none) within each series: otherwise the error
// names them.
func (w window) splitSeries(names, groupBy []string) ([]*seriesPlan, error) {
	idx := make([]int, len(groupBy))
	for k, c := range groupBy {
		for j, n := range names {
			if n == c {
				idx[k] = j
			}
		}
	}
	byKey := map[string]*seriesPlan{}
	var out []*seriesPlan
	var b strings.Builder
	for i := 0; i < w.rows(); i++ {
		if !w.featuresPresent(i) {
			continue
		}
		b.Reset()
		for _, j := range idx {
			v, _ := w.tagValue(i, j)
			b.WriteString(v)
			b.WriteByte(0)
		}
		s := byKey[b.String()]
		if s == nil {
			s = &seriesPlan{tags: w.tagsOf(i, names)}
			group := map[string]string{}
			for _, c := range groupBy {
				if v, ok := s.tags[c]; ok {
					group[c] = v
				}
			}
			s.key = schemas.FormatTags(group)
			if s.key == "" {
				s.key = "<no tags>"
			}
			byKey[b.String()] = s
			out = append(out, s)
		}
		s.rows = append(s.rows, i)
	}
	// Every tag outside group_by holds one value within each series.
	conflicts := map[string]string{} // column -> an example series
	for _, s := range out {
		first := s.rows[0]
		for j, n := range names {
			if containsString(groupBy, n) {
				continue
			}
			v0, _ := w.tagValue(first, j)
			for _, i := range s.rows[1:] {
				if v, _ := w.tagValue(i, j); v != v0 {
					if _, seen := conflicts[n]; !seen {
						conflicts[n] = s.key
					}
					break
				}
			}
		}
	}
	if len(conflicts) > 0 {
		cols := make([]string, 0, len(conflicts))
		for c := range conflicts {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		parts := make([]string, len(cols))
		for k, c := range cols {
			parts[k] = fmt.Sprintf("%q (e.g. within %s)", c, conflicts[c])
		}
		return nil, fmt.Errorf("tags outside group_by must hold one value within each series, and %s do not: add them to group_by, or select one value with tags",
			strings.Join(parts, ", "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// splitRows is split over some rows of the window (every feature present).
func (w window) splitRows(rows []int) (examples, queries []int) {
	for _, i := range rows {
		if w.target.IsNull(i) {
			queries = append(queries, i)
		} else {
			examples = append(examples, i)
		}
	}
	return examples, queries
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// seriesInFlight bounds the series a producer plans at once: each waits on
// the object store and on its batches' acknowledgements, not on a CPU.
const seriesInFlight = 16

// firstDeliveryKey marks a context whose job is delivered for the first
// time (its message's first delivery).
type firstDeliveryKey struct{}

// noStoredPlansKey marks a context whose group_by job no earlier delivery
// planned: its series need no look for a stored plan.
type noStoredPlansKey struct{}

// markSeriesPlanned stores a marker under the parent task's context name
// before any series is planned. A job on its first delivery with no marker
// stored (a job retried from the dead-letter queue is a first delivery too)
// has no stored plans to look for: the returned context says so.
func (p *Producer) markSeriesPlanned(ctx context.Context, parent string) (context.Context, error) {
	_, err := p.obj.GetInfo(ctx, schemas.ContextObject(parent))
	switch {
	case err == nil:
		return ctx, nil
	case !bus.IsNotFound(err):
		return ctx, fmt.Errorf("read series marker: %w", err)
	}
	if _, err := p.obj.Put(ctx, jetstream.ObjectMeta{Name: schemas.ContextObject(parent),
		Opts: &jetstream.ObjectMetaOptions{ChunkSize: 16}}, strings.NewReader("group_by")); err != nil {
		return ctx, fmt.Errorf("store series marker: %w", err)
	}
	if firstDelivery(ctx) {
		ctx = context.WithValue(ctx, noStoredPlansKey{}, true)
	}
	return ctx, nil
}

func firstDelivery(ctx context.Context) bool {
	first, _ := ctx.Value(firstDeliveryKey{}).(bool)
	return first
}
