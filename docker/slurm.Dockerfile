# A small real Slurm cluster (slurmctld, two slurmd with fake GPUs, munge) and the login node's sshd,
# started by the same script CI uses: scripts/slurm-lab/start.sh.
FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
COPY scripts/slurm-lab /opt/slurm-lab
RUN /opt/slurm-lab/install.sh && rm -rf /var/lib/apt/lists/*
EXPOSE 2222
CMD ["/bin/sh", "-c", "/opt/slurm-lab/start.sh && exec tail -F /lab/log/*.log"]
