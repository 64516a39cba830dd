package countersign

import (
	"context"
	"sync"

	"github.com/countersign/countersign/store"
)

// maxSettleGroup bounds the settlements written in one transaction.
const maxSettleGroup = 256

// settleGroup writes the settlements of concurrent executions in groups: a
// settlement waits only for a free lane, then goes out with every other one
// that queued meanwhile, in one transaction (group commit). With more than
// one lane, groups are written side by side, each in its own transaction:
// the settlements of one execution are queued one after another (each waits
// for its write), so no two lanes ever hold the same proposal's.
type settleGroup struct {
	store store.Store
	lanes int
	queue chan *settleRequest
}

type settleRequest struct {
	params *store.SettleParams
	done   chan settleResult
}

type settleResult struct {
	tr  *store.TransitionResult
	err error
}

func newSettleGroup(s store.Store, lanes int) *settleGroup {
	return &settleGroup{store: s, lanes: max(1, lanes), queue: make(chan *settleRequest, maxSettleGroup*max(1, lanes))}
}

// settle queues one settlement and waits for its group's write. If the
// settlement ends the execution (a terminal status, or reconciling with the
// lease released: nothing runs after it), done is called once it is queued,
// so that the worker may start another execution while the write is on its
// way.
func (g *settleGroup) settle(ctx context.Context, params *store.SettleParams, done func()) (*store.TransitionResult, error) {
	req := &settleRequest{params: params, done: make(chan settleResult, 1)}
	select {
	case g.queue <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if done != nil && (params.Status.Terminal() || params.ReleaseLease) {
		done()
	}
	r := <-req.done
	return r.tr, r.err
}

// run writes groups on every lane until ctx ends and the queue is empty.
// The worker ends ctx only after its executions stopped, so no settlement
// is left behind.
func (g *settleGroup) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range g.lanes {
		wg.Go(func() { g.lane(ctx) })
	}
	wg.Wait()
}

// lane takes the first settlement queued, and with it every one queued
// meanwhile, up to maxSettleGroup, and writes them; then the next.
func (g *settleGroup) lane(ctx context.Context) {
	for {
		var first *settleRequest
		select {
		case first = <-g.queue:
		case <-ctx.Done():
			for {
				select {
				case req := <-g.queue:
					g.write(context.WithoutCancel(ctx), []*settleRequest{req})
				default:
					return
				}
			}
		}
		group := []*settleRequest{first}
	collect:
		for len(group) < maxSettleGroup {
			select {
			case req := <-g.queue:
				group = append(group, req)
			default:
				break collect
			}
		}
		g.write(context.WithoutCancel(ctx), group)
	}
}

func (g *settleGroup) write(ctx context.Context, group []*settleRequest) {
	params := make([]*store.SettleParams, len(group))
	for i, r := range group {
		params[i] = r.params
	}
	results, errs, err := g.store.SettleMany(ctx, params)
	for i, r := range group {
		switch {
		case err != nil:
			r.done <- settleResult{err: err}
		default:
			r.done <- settleResult{tr: results[i], err: errs[i]}
		}
	}
}
