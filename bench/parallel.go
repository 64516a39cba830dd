package main

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn for every i in [0, n) on workers goroutines, each taking
// the next i as it finishes one (worker is the goroutine's number). After a
// failure no goroutine takes another i; the first error is returned.
func parallel(n, workers int, fn func(worker, i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(w, i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
