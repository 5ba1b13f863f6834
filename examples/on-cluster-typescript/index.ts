// Triton serving on a GKE cluster you already have: the TypeScript twin of examples/on-cluster-python.
// @pulumi/triton-gke is the SDK `pulumi package add` generates from the component package's schema (sdks/triton-gke,
// linked in package.json); its properties are the Args in camelCase (docs/reference/triton-on-cluster.md).
import * as kubernetes from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as tritonGke from "@pulumi/triton-gke";

const config = new pulumi.Config();
const kubeconfig = config.get("kubeconfig") ? config.requireSecret("kubeconfig") : undefined;
// Without a kubeconfig the component's children use the kubernetes provider given here (the current context).
const opts = kubeconfig ? undefined : { providers: [new kubernetes.Provider("cluster")] };

const triton = new tritonGke.TritonOnCluster(
    "triton",
    {
        modelRepository: config.require("modelRepository"),
        kubeconfig: kubeconfig,
        minReplicas: 1,
        maxReplicas: 2,
    },
    opts,
);

export const namespace = triton.namespace;
export const httpEndpoint = triton.httpEndpoint;
export const grpcEndpoint = triton.grpcEndpoint;
