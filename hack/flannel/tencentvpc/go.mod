// Module vpc stands in for the TencentCloud VPC SDK module, which the Go
// module proxy does not serve at the version flannel requires. flanneld
// links its tencentvpc backend unconditionally; the lab uses the vxlan
// backend, so this module only has to compile: every call fails.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.26.8
