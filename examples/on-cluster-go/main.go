// Triton serving on a GKE cluster you already have: the Go twin of examples/on-cluster-python.
// tritongke is the SDK `pulumi package add` generates from the component package's schema (sdks/triton-gke, linked
// by go.mod's replace); its Args fields are the schema's properties in PascalCase, plain ones as plain Go values
// (docs/reference/triton-on-cluster.md).
package main

import (
	"example.com/pulumi-triton-gke/sdk/go/tritongke"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		conf := config.New(ctx, "")
		args := &tritongke.TritonOnClusterArgs{
			ModelRepository: pulumi.String(conf.Require("modelRepository")),
			MinReplicas:     pulumi.IntRef(1),
			MaxReplicas:     pulumi.IntRef(2),
		}
		var opts []pulumi.ResourceOption
		if conf.Get("kubeconfig") != "" {
			args.Kubeconfig = conf.RequireSecret("kubeconfig")
		} else {
			// Without a kubeconfig the component's children use this kubernetes provider (the current context).
			cluster, err := kubernetes.NewProvider(ctx, "cluster", nil)
			if err != nil {
				return err
			}
			opts = append(opts, pulumi.Providers(cluster))
		}
		triton, err := tritongke.NewTritonOnCluster(ctx, "triton", args, opts...)
		if err != nil {
			return err
		}
		ctx.Export("namespace", triton.Namespace)
		ctx.Export("httpEndpoint", triton.HttpEndpoint)
		ctx.Export("grpcEndpoint", triton.GrpcEndpoint)
		return nil
	})
}
