// Package par runs one function for many ids at once, with a bound, and
// returns the answers in the ids' order (errgroup gives no order).
package par

import "sync"

// Limit is how many calls Each runs at once.
const Limit = 16

// Each runs f for every id (brokers, partitions) at once, at most Limit at
// a time, and returns the answers in the order of ids.
func Each[T any](ids []int32, f func(id int32) T) []T {
	return EachN(Limit, ids, f)
}

// EachN is Each with at most n calls at once (n < 1: one at a time).
func EachN[T any](n int, ids []int32, f func(id int32) T) []T {
	out := make([]T, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(n, 1))
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = f(id)
		}()
	}
	wg.Wait()
	return out
}
