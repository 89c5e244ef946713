"""Realistic manifest strings that hold no credential: the scanner must refuse none of them.

Descriptions and notes in the eight languages the product is used in, dataset and model ids, revisions
(sha256 digests, git SHAs, UUIDs), URIs, evaluation suites, ordinary words that contain a credential
word, and placeholders a person writes where a secret would go.
"""

from __future__ import annotations

SHA256 = "9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f"
GIT_SHA = "4e1c9a2f7b3d5e8c0a6f1d2b9e7c4a3f5d8b0e6c"

DESCRIPTIONS = [
    # English
    "Instruction-tune the 8B base on the support corpus, then align with DPO.",
    "Continued pretraining on 2T tokens of permissively licensed code and math.",
    "Fine-tune with a token budget of 2T tokens and max_tokens 4096 per sample.",
    "The API key rotation runbook lives in the wiki; nothing secret belongs here.",
    "Set WANDB_API_KEY=<your-key> and HF_TOKEN=${HF_TOKEN} in the environment, never in this file.",
    "Passwordless SSH to the nodes is configured by the platform team.",
    "The password for the cluster is stored in Vault.",
    "Bearer tokens are never stored in manifests.",
    "Basic tokenization with a BPE tokenizer and a 32k vocabulary.",
    "The secretary general approved the budget for the quarterly evaluation run.",
    "Keys-and-values cache is quantised to 8 bits during evaluation.",
    "RLHF with a reward model trained on 120k preference pairs; KL coefficient 0.05.",
    "Decontaminated against MMLU, GSM8K and HumanEval with 13-gram overlap.",
    "Checkpoint every 500 steps and keep the last 3; resume from step 12000 if preempted.",
    "Use authentication via the workload identity of the cluster, not a static credential.",
    "Run at 10:30 on 2026-11-20; see https://wiki.example.com/runs?id=42 for notes.",
    "Contact ml-team@acme.example for access to the raw logs.",
    "The learning rate warms up linearly for 2000 steps, then follows a cosine schedule.",
    "Token-level loss masking is applied to the system prompt and tool outputs.",
    "Secret sauce: a careful data mix, 60% web, 25% code, 15% math.",
    "password policy: rotate every 90 days (handled by IT, not by this run)",
    "api_key: changeme",
    "token: xxxxxxxxxxxxxxxx",
    "The key insight is that shorter contexts generalise better here.",
    "Access to the bucket is granted through the role acme-ml-training-reader.",
    # German
    "Feinabstimmung des Modells mit deutschen Daten; das Passwort-Handbuch liegt im Wiki.",
    "Das Modell wird auf dem Support-Korpus weitertrainiert und danach mit DPO ausgerichtet.",
    "Der Schlüssel zum Erfolg ist eine saubere Datenmischung mit geprüfter Herkunft.",
    "Bewertung gegen MMLU und GSM8K; Überschneidungen wurden mit 13-Grammen entfernt.",
    "Das Passwort wird nie im Manifest gespeichert, sondern im Tresor des Teams.",
    # French
    "Entraînement du modèle sur le corpus de support, puis alignement par DPO.",
    "Le mot de passe n’est jamais écrit ici : il est géré par l’équipe plateforme.",
    "Évaluation sur MMLU et GSM8K ; la décontamination a retiré 0,3 % des exemples.",
    "Les points de contrôle sont conservés 30 jours dans le bucket de l’équipe.",
    "Budget : 4 800 USD au plus, 1 200 USD par étape supplémentaire.",
    # Spanish
    "Ajuste fino del modelo con datos en español y alineación posterior con DPO.",
    "La contraseña nunca se guarda en el manifiesto; la gestiona el equipo de plataforma.",
    "¿Por qué 13-gramas? Porque detectan solapamientos sin penalizar frases comunes.",
    "Los puntos de control se guardan cada 500 pasos y se conservan los tres últimos.",
    "La clave del experimento es la mezcla de datos: 60 % web y 40 % código.",
    # Portuguese
    "Ajuste fino do modelo com dados em português; 1º lote revisado, 2ª etapa pendente.",
    "A senha nunca é escrita aqui: fica no cofre da equipe de plataforma.",
    "Avaliação no MMLU e no GSM8K; nº de exemplos removidos: 1 234.",
    "O 3º experimento usa taxa de aprendizagem de 2e-5 e aquecimento de 2 000 passos.",
    "Pontos de controlo guardados a cada 500 passos; a palavra-passe do cluster não é usada.",
    # Russian
    "Дообучение модели на корпусе поддержки, затем выравнивание с помощью DPO.",
    "Пароль никогда не хранится в манифесте: им управляет команда платформы.",
    "Оценка на MMLU и GSM8K; пересечения удалены по 13-граммам.",
    "Контрольные точки сохраняются каждые 500 шагов, хранятся последние три.",
    "Ключ к успеху — аккуратная смесь данных с проверенным происхождением.",
    # Chinese, with full-width punctuation
    "在支持语料上微调模型，然后用DPO对齐。",
    "密码不会写在清单里：由平台团队统一管理。",
    "已针对MMLU、GSM8K进行去污染检查（13-gram重叠）。",
    "每500步保存一次检查点，保留最近3个；预算上限为4800美元。",
    "令牌预算为2万亿个词元；max_tokens设为4096。",
    "数据来源：公开网页60%，代码25%，数学15%！",
    # Japanese
    "サポートコーパスでモデルを微調整し、DPOで整合させる。",
    "パスワードはマニフェストに書かない。プラットフォームチームが管理する。",
    "MMLUとGSM8Kに対して汚染除去を確認済み（13-gram）。",
    "チェックポイントは500ステップごとに保存し、最新の3つを保持する。",
    "トークン予算は2兆トークン、最大長は4096。",
    "ＧＰＵは８基、学習率は２ｅ－５（ウォームアップ２０００ステップ）。",
]

IDS_AND_URIS = [
    "ito-labs/atlas-8b", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
    "mistralai/Mixtral-8x7B-v0.1", "stabilityai/sdxl-turbo", "bigscience/bloom-560m", "allenai/c4",
    "HuggingFaceFW/fineweb-edu", "openai/gsm8k", "cais/mmlu", "openai_humaneval", "EleutherAI/pile",
    "support-conversations-2026q3", "preference-pairs-v4", "acme/evals/suite-007/split-0042/heldout-v3",
    "s3://acme-ml-data/support/conversations-2026q3/", "gs://acme-ml-reports/decontam/shard-001/report.html",
    "hf://datasets/acme/preference-pairs-v4", "ito://reports/acme/decontam-prefs-v4",
    "az://acmestorage/container/path/to/data", "https://example.com/data/set",
    "https://huggingface.co/datasets/acme/support-v2/resolve/main/train.parquet",
    f"https://huggingface.co/acme/atlas-8b/resolve/{GIT_SHA}/config.json",
    "s3://bucket/a@b", "git@github.com:acme/training-recipes.git", "mailto:ml-team@acme.example",
    "owner:ml-team@acme.example", f"nvcr.io/nvidia/pytorch:24.01-py3@sha256:{SHA256}",
    "ghcr.io/acme/trainer:2026.11.20", "file:///mnt/shared/datasets/support-v2/",
    "https://wandb.ai/acme/atlas-8b/runs/3f9a2b1c", "https://github.com/acme/training-recipes/tree/main/configs",
    "projects/acme-ml/locations/us-central1/datasets/support-v2", "arn:aws:s3:::acme-ml-checkpoints/atlas-8b/",
    "s3://acme-ml-checkpoints/atlas-8b-support/", "/mnt/checkpoints/atlas-8b/step_000500",
    "~/.cache/huggingface/hub", "./configs/fine_tune.yaml",
    "https://example.com/docs/tokens/overview-of-tokenization", "https://example.com/search?key=title",
    "https://docs.example.com/keys/rotation-guide", "https://example.com/api/v1/health",
]

REVISIONS = [
    f"sha256:{SHA256}", SHA256, GIT_SHA, GIT_SHA[:12], GIT_SHA[:7], "0f3a5c7e9b1d2f4a6c8e0b2d4f6a8c0e2b4d6f8a",
    "3f2b8c1e-9a7d-4e6f-8b2c-1d0e9f8a7b6c", "c0ffee00-1234-4abc-9def-0123456789ab", "v1.2.3", "v1.2.3-rc.4+build.5",
    "2026-11-20", "2026-11-20T10:30:00Z", "checkpoint-000500", "step_000500.safetensors",
    "model-00001-of-00004.safetensors", "refs/pr/12", "main@{2026-11-20}", "md5:5c94767cedb5d6987c902ac850ded2c6",
    "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262", "etag:\"9b2e4f6a8c0d1e3f\"",
]

SUITES_AND_WORDS = [
    "mmlu", "gsm8k", "humaneval", "acme-support-heldout", "mt-bench", "alpacaeval-2", "arc-challenge",
    "hellaswag", "truthfulqa_mc2", "winogrande", "big-bench-hard", "ifeval", "mbpp", "math-500",
    "tokenizer: bpe-32k-v2-sentencepiece", "max_tokens: 409600000", "token_budget: 2000000000000", "tokens: 2T",
    "passwordless: enabled", "secretary: Johanna Schmidt", "keys-and-values", "key_value_heads: 8",
    "bearer of news", "The bearer of news arrives.", "Authorization is handled by the platform.",
    "sk-1", "hf_short", "ghp_short", "AKIA-is-a-prefix-only", "sk-learn-compatible-estimator",
    "task-1234567890-finetune-sft-dpo", "disk-cache-0123456789abcdef", "risk-assessment-2026-quarterly-review-v2",
    "13-gram overlap, exact and near-duplicate (MinHash 0.8)", "4800.00", "1200.00", "fine_tune", "continued_pretrain",
    "bf16-mixed", "deepspeed_zero3_offload", "FSDP_FULL_SHARD", "cosine_with_restarts", "adamw_torch_fused",
    "p4d.24xlarge", "a3-highgpu-8g", "Standard_ND96asr_v4", "us-east-1", "europe-west4-a",
    "pad_token: <|endoftext|>", "eos_token: </s>", "bos_token: <s>", "chat_template: chatml",
    "keyword: Befaehigung_P2", "primaryKey: run_id", "cache key: " + SHA256, "secret_name: prod-db-credentials",
    "password_file: /run/secrets/db", "token_url: https://auth.example.com/oauth/token",
    "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMb1mS3u7v4cQ3ZgZ8l8Jq5b8vX3Q9W9XyZ0p1q2r3s4 ml@acme",
    "credentials are provided by the workload identity", "auth: workload-identity", "cookie policy: none",
    "dataset key: support-v2/train", "the key is to keep batches balanced", "pass@1 and pass@10 on HumanEval",
    "first pass: dedupe; second pass: filter", "apiVersion: v1", "kind: ConfigMap",
    "docker login --password-stdin", "docker run -p 8080:80 nginx", "curl -u $USER:$TOKEN https://x.example.com",
    "curl https://example.com/health", "Authorization: Bearer <token>", "bearer ${ACCESS_TOKEN}",
    "git clone https://github.com/acme/training-recipes.git", "ssh-keygen -t ed25519 -C ml@acme",
]

PLACEHOLDERS = [
    "xxxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "<your-key>", "<your-api-key>", "${VAR}", "${HF_TOKEN}",
    "$HF_TOKEN", "%HF_TOKEN%", "{{ secrets.HF_TOKEN }}", "changeme", "change_me", "CHANGEME", "********",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "0000000000000000000000000000000000000000", "1234567890abcdef",
    "password: <redacted>", "token: ***", "api_key: ${OPENAI_API_KEY}", "HF_TOKEN=<hf token here>",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "AKIAXXXXXXXXXXXXXXXX", "password=REPLACE_ME", "secret: TODO", "token: your-token-here",
    "postgres://<user>:<password>@localhost/db", "https://${USER}:${PASS}@git.example.com",
    "api_key = os.environ['OPENAI_API_KEY']", "password: !vault |", "password: ENC[AES256_GCM,data:abc,type:str]",
    "export HF_TOKEN=", "token = None", "password: null", "secret: false",
]

BENIGN_STRINGS: list[str] = DESCRIPTIONS + IDS_AND_URIS + REVISIONS + SUITES_AND_WORDS + PLACEHOLDERS

# Object keys of realistic manifests and configs: none names a credential.
BENIGN_KEYS: list[str] = [
    "max_tokens", "tokenizer", "tokenizer_name", "num_tokens", "token_budget", "TOKEN_LIMIT", "tokenBudget",
    "tokens", "author", "authority", "secretary", "keyword", "keys", "passage", "monkey", "bookkeeper",
    "passwordless", "keys-and-values", "key_value_heads", "compass", "bypass_cache", "description", "revision",
    "eval_suites", "checked_at", "ceiling_usd", "max_incremental_cost_usd", "interval_steps", "retain_last",
    "storage", "uri", "url", "header_rows", "key", "pad_token", "eos_token", "bos_token", "unk_token",
    "mask_token", "public_key", "primary_key", "cache_key", "secret_name", "password_file", "token_url",
    "auth_method", "credentials_id", "api_version", "key_id", "sort_key", "partition_key", "idempotency_key",
]
