#!/bin/bash
# CostGuard notebook heartbeat: SageMaker runs this as root at every start of the
# notebook instance. It must never fail or slow the start (SageMaker fails a start
# whose on-start script exits non-zero or runs over 5 minutes), so it only writes a
# file and starts one background process, swallowing every error, and exits 0.
# The heartbeat itself (Python, standard library + boto3 or the AWS CLI) publishes
# to CloudWatch every 5 minutes; it needs no internet, only the regional CloudWatch
# endpoint (in a VPC without internet: a com.amazonaws.<region>.monitoring endpoint).
set -u
COSTGUARD_DIR="${COSTGUARD_AGENT_DIR:-/home/ec2-user/.costguard}"
costguard_start() {
  mkdir -p "$COSTGUARD_DIR" || return 0
  cat > "$COSTGUARD_DIR/heartbeat.py" <<'COSTGUARD_HEARTBEAT_PY'
__HEARTBEAT_PY__
COSTGUARD_HEARTBEAT_PY
  py=""
  for c in ${COSTGUARD_PYTHONS:-/home/ec2-user/anaconda3/envs/JupyterSystemEnv/bin/python /home/ec2-user/anaconda3/bin/python3 /usr/bin/python3 python3}; do
    if command -v "$c" >/dev/null 2>&1; then py="$c"; break; fi
  done
  if [ -z "$py" ]; then echo "costguard: no python found, no heartbeat"; return 0; fi
  run="nohup $py $COSTGUARD_DIR/heartbeat.py --loop >> $COSTGUARD_DIR/heartbeat.log 2>&1 < /dev/null &"
  if [ "$(id -u)" = "0" ] && id ec2-user >/dev/null 2>&1; then
    chown -R ec2-user "$COSTGUARD_DIR" 2>/dev/null
    su ec2-user -s /bin/bash -c "$run"  # least privilege: the notebook user, not root
  else
    bash -c "$run"
  fi
  echo "costguard: heartbeat started with $py"
}
costguard_start >> "${COSTGUARD_DIR}.on-start.log" 2>&1 || true
exit 0
