module triton-on-cluster-go

go 1.22

require (
	example.com/pulumi-triton-gke/sdk/go v0.2.0
	github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.34.0
	github.com/pulumi/pulumi/sdk/v3 v3.260.0
)

// The SDK `pulumi package add` generated into sdks/triton-gke (it prints this line).
replace example.com/pulumi-triton-gke/sdk/go => ./sdks/triton-gke
