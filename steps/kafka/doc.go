// Package kafka is kremedy's port adapter over franz-go (kgo, kadm). It asks
// brokers one at a time when their views must be compared (a broker's own
// metadata cache is the thing that goes stale), never lets a Metadata request
// auto-create a topic, and bypasses kadm's metadata cache.
package kafka
