# The k3d-gpu node image: k3s from rancher/k3s on an Ubuntu base, with the NVIDIA container
# toolkit installed so k3s's containerd gets the nvidia runtime, and CDI on (containerd 2.x
# reads /etc/cdi and /var/run/cdi). No CUDA toolkit: the host's driver libraries reach pods
# through the runtime, and workloads bring their own CUDA. Nothing k3d-gpu applies itself
# (device plugins, policies) is baked in.
#
# `k3d-gpu apply` builds it as the plan's node-image action and passes K3S_DIGEST and
# UBUNTU_DIGEST from images.lock, so both bases are pinned by digest. A plain
# `docker build .` works too and then uses the tags alone.
ARG K3S_TAG=v1.37.1-k3s1
ARG K3S_DIGEST=
ARG UBUNTU_TAG=26.04
ARG UBUNTU_DIGEST=

FROM rancher/k3s:${K3S_TAG}${K3S_DIGEST:+@}${K3S_DIGEST} AS k3s

FROM ubuntu:${UBUNTU_TAG}${UBUNTU_DIGEST:+@}${UBUNTU_DIGEST}
ARG K3S_TAG
ARG NVIDIA_CONTAINER_TOOLKIT_VERSION=1.20.1-1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The toolkit from NVIDIA's apt repository, every package of it at the pinned version.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg \
 && curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey \
    | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg \
 && curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
    | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#' \
    > /etc/apt/sources.list.d/nvidia-container-toolkit.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
    "nvidia-container-toolkit=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "nvidia-container-toolkit-base=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "libnvidia-container-tools=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "libnvidia-container1=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
 && apt-get purge -y curl gnupg \
 && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /etc/cdi /var/run/cdi

# k3s as rancher/k3s lays it out: the binary at /bin/k3s (k3d's entrypoint runs that path;
# /bin is /usr/bin on Ubuntu) and its helpers in /bin/aux, on PATH as in the upstream image.
# k3s finds /usr/bin/nvidia-container-runtime at start and adds the nvidia runtime to its
# containerd config; the cluster's --default-runtime=nvidia makes it the default.
COPY --from=k3s /bin/k3s /usr/bin/k3s
COPY --from=k3s /bin/aux /usr/bin/aux
RUN ln -s k3s /usr/bin/kubectl && ln -s k3s /usr/bin/crictl && ln -s k3s /usr/bin/ctr

VOLUME /var/lib/kubelet
VOLUME /var/lib/rancher/k3s
VOLUME /var/lib/cni
VOLUME /var/log
ENV PATH="$PATH:/bin/aux"
ENV CRI_CONFIG_FILE="/var/lib/rancher/k3s/agent/etc/crictl.yaml"

LABEL io.k3d-gpu.k3s-version="${K3S_TAG}" \
      io.k3d-gpu.nvidia-container-toolkit-version="${NVIDIA_CONTAINER_TOOLKIT_VERSION}"

ENTRYPOINT ["/bin/k3s"]
CMD ["agent"]
