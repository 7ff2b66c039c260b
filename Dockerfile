# The one image both Deployments run: `wspin webhook` and `wspin controller`.
#
#   docker build -t ghcr.io/llmsafespaces/wspin:0.1.0 .
#
# Two stages: the wheel is built with the build tooling, and only the installed package (no
# compiler, no pip cache, no sources) reaches the runtime image.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY wspinctl ./wspinctl
COPY wspin ./wspin
COPY webhook ./webhook
COPY controller ./controller
COPY certs ./certs
# The cloud SDK extras are included: the controller's relay drivers load them on demand.
RUN python -m venv /opt/wspin \
 && /opt/wspin/bin/pip install --upgrade pip \
 && /opt/wspin/bin/pip install '.[aws,oci]'

FROM python:3.11-slim
# Numeric user and group: the chart sets runAsNonRoot, and the kubelet can verify a numeric
# USER without reading /etc/passwd from the image. 10001 matches the chart's runAsUser.
ARG UID=10001
RUN groupadd --system --gid "${UID}" wspin \
 && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin wspin
COPY --from=build /opt/wspin /opt/wspin
ENV PATH=/opt/wspin/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
# 8443 admission (HTTPS), 9090 webhook metrics/probes, 8081 controller probes, 8080 controller metrics.
EXPOSE 8443 9090 8081 8080
ENTRYPOINT ["wspin"]
CMD ["--help"]
