// Package store keeps an export set in a cluster, in the shards package
// mcs makes of it (mcs.Marshalled, mcs.ShardEncoder): one ConfigMap per
// shard in the tenant namespace, written shard by shard so that a change
// rewrites the shards it touches only, and read whole or not at all.
package store
