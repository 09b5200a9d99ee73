# A small real Slurm cluster (slurmctld, two slurmd with fake GPUs, munge) and the login node's sshd,
# started by the same script CI uses: scripts/slurm-lab/start.sh.
FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive SLURM_LAB_DIR=/lab SLURM_LAB_SSH_KEY_OWNER=1000
COPY scripts/slurm-lab /opt/slurm-lab
RUN /opt/slurm-lab/install.sh && rm -rf /var/lib/apt/lists/*
EXPOSE 2222
# start.sh writes the daemons' logs to $SLURM_LAB_DIR/log (slurmctld.log, slurmd-nodeN.log, sshd.log and
# their stdout in *.out); the portal image's user (uid 1000) gets the service account's key in the volume.
CMD ["/bin/sh", "-c", "/opt/slurm-lab/start.sh && exec tail -n +1 -F \"$SLURM_LAB_DIR\"/log/*.log \"$SLURM_LAB_DIR\"/log/*.out"]
