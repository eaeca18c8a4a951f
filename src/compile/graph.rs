//! The desired resource graph: every thing k3d-gpu owns, its desired spec, how it changes,
//! and what it depends on. Serialises canonically (resources sorted by id) and as DOT.

use std::collections::BTreeMap;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};

/// How a resource changes: in place, replace (the cluster), or verify (docs/ARCHITECTURE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// Server-side apply, in place.
    InPlace,
    /// Fixed when k3d creates the cluster: a change recreates the cluster.
    Replace,
    /// A check after apply.
    Verify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceKind {
    /// The node image: built or pulled before the cluster is created from it.
    NodeImage,
    Cluster,
    NodeLabel,
    NodeAnnotation,
    Object,
    Verify,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    pub id: String,
    pub kind: ResourceKind,
    pub change: Change,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    pub spec: serde_json::Value,
    pub depends_on: Vec<String>,
}

impl Resource {
    /// A check verify runs after apply: `spec` says what it checks, `component` whose it is.
    pub fn verify(id: String, component: Option<String>, spec: serde_json::Value, depends_on: Vec<String>) -> Resource {
        Resource { id, kind: ResourceKind::Verify, change: Change::Verify, component, spec, depends_on }
    }
}

/// Something worth saying about the compile that is not an error.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Warning {
    pub code: String,
    pub text: String,
    /// The config key it is about, e.g. `sharing.allocation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DesiredGraph {
    pub graph: DiGraph<Resource, ()>,
    pub index: BTreeMap<String, NodeIndex>,
    pub warnings: Vec<Warning>,
    /// Where the agent runs and why, when the config has one.
    pub agent: Option<super::agent::AgentPlan>,
    /// The images the graph deploys, by catalog name, and how each is pinned.
    pub images: BTreeMap<String, crate::images::Use>,
    /// Pods the config promises may share one device, by the resource the device plugin
    /// advertises (`[sharing] shared`, `[sharing.nvidia] replicas`); only resources shared by
    /// more than one pod. What `k3d-gpu test` proves by running that many pods at once.
    pub shares: BTreeMap<String, u32>,
    /// The NVIDIA GPUs are shared through CUDA MPS (their share in `shares` is MPS clients).
    pub mps: bool,
    /// A fleet's nodes, in the config's order, each with the digest of its facts (empty for
    /// one machine): what a fleet plan's facts digest is made of, so that no node's facts
    /// are serialised a second time for the plan (`compile::fleet`).
    pub fleet_facts: Vec<(String, String)>,
}

/// graph/v1's `schema`.
pub const GRAPH_SCHEMA: &str = "k3d-gpu.graph/v1";

#[derive(Serialize)]
struct GraphDocument<'a> {
    schema: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a super::agent::AgentPlan>,
    resources: Vec<&'a Resource>,
    warnings: &'a [Warning],
}

/// Why resources do not make a graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("two resources have the id {0}")]
    TwoWithId(String),
    #[error("{id} depends on {dep}, which is not in the graph")]
    Dangling { id: String, dep: String },
    #[error("dependency cycle through {0}")]
    Cycle(String),
}

impl DesiredGraph {
    /// Builds the graph; an edge runs from a dependency to its dependent. Dangling ids and
    /// cycles are compiler bugs or bad user components.
    pub fn build(
        mut resources: Vec<Resource>,
        mut warnings: Vec<Warning>,
        agent: Option<super::agent::AgentPlan>,
    ) -> Result<DesiredGraph, GraphError> {
        resources.sort_by(|a, b| a.id.cmp(&b.id));
        let mut graph = DiGraph::new();
        let mut index = BTreeMap::new();
        for r in resources {
            if index.contains_key(&r.id) {
                return Err(GraphError::TwoWithId(r.id));
            }
            let id = r.id.clone();
            index.insert(id, graph.add_node(r));
        }
        for (id, &node) in &index {
            let deps = graph[node].depends_on.clone();
            for dep in deps {
                let Some(&from) = index.get(&dep) else {
                    return Err(GraphError::Dangling { id: id.clone(), dep });
                };
                graph.add_edge(from, node, ());
            }
        }
        if let Err(cycle) = petgraph::algo::toposort(&graph, None) {
            return Err(GraphError::Cycle(graph[cycle.node_id()].id.clone()));
        }
        warnings.sort();
        warnings.dedup();
        Ok(DesiredGraph {
            graph,
            index,
            warnings,
            agent,
            images: BTreeMap::new(),
            shares: BTreeMap::new(),
            mps: false,
            fleet_facts: Vec::new(),
        })
    }

    pub fn get(&self, id: &str) -> Option<&Resource> {
        self.index.get(id).map(|&i| &self.graph[i])
    }

    /// Resources sorted by id.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.index.values().map(|&i| &self.graph[i])
    }

    /// graph/v1 JSON, canonical bytes.
    pub fn to_json(&self) -> Vec<u8> {
        crate::canonical::to_bytes(&GraphDocument {
            schema: GRAPH_SCHEMA,
            agent: self.agent.as_ref(),
            resources: self.resources().collect(),
            warnings: &self.warnings,
        })
    }

    /// Graphviz DOT, nodes in id order, shaped by change semantics.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph k3d_gpu {\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n");
        for r in self.resources() {
            let shape = match r.change {
                Change::Replace => "box, style=bold",
                Change::InPlace => "box",
                Change::Verify => "ellipse, style=dashed",
            };
            out.push_str(&format!("  {:?} [shape={shape}];\n", r.id));
        }
        for r in self.resources() {
            for dep in &r.depends_on {
                out.push_str(&format!("  {dep:?} -> {:?};\n", r.id));
            }
        }
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str, after: &[&str]) -> Resource {
        Resource {
            id: id.into(),
            kind: ResourceKind::NodeLabel,
            change: Change::InPlace,
            component: None,
            spec: serde_json::Value::Null,
            depends_on: after.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn a_graph_that_cannot_be_built_says_why_by_its_variant() {
        let build = |resources| DesiredGraph::build(resources, Vec::new(), None).map(|_| ()).unwrap_err();
        assert_eq!(build(vec![label("a", &["b"]), label("b", &["a"])]), GraphError::Cycle("b".into()));
        assert_eq!(build(vec![label("a", &["z"])]), GraphError::Dangling { id: "a".into(), dep: "z".into() });
        assert_eq!(build(vec![label("a", &[]), label("a", &[])]), GraphError::TwoWithId("a".into()));
    }
}
