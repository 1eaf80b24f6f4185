"""What people and the agent write in an agent-loop conversation, in English, Portuguese, Chinese and
Japanese: the task, follow-ups, the agent's short notes between tool calls, and log lines.

Templates take `{x}` (a file, symbol or fact) and nothing else; CJK templates put identifiers both
between spaces and glued to the text, as people write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Language = Literal["en", "pt", "zh", "ja"]


@dataclass(frozen=True)
class Prose:
    """One language's templates."""

    system: str
    task: str  # {x}: the facts the task states, joined
    follow_ups: tuple[str, ...]  # {x}: one fact
    notes: dict[str, tuple[str, ...]]  # tool name -> notes before its call; {x}: what it reads or runs
    uses: tuple[str, ...]  # a late note that uses a fact; {x}: the fact
    log_lines: tuple[str, ...]  # localised log messages inside tool output; {x}: a symbol
    final: str


PROSE: dict[Language, Prose] = {
    "en": Prose(
        system="You are a coding agent working in a payments monorepo. Use the tools; keep changes small.",
        task="The nightly settlement job is failing again. What we know so far: {x}. Find the cause, fix "
             "it with a test, and tell me what you changed.",
        follow_ups=("Also: finance says the affected value is {x}; make sure the fix covers it.",
                    "Before you finish, double-check {x} - it came up in the incident channel."),
        notes={"read_file": ("Reading {x} to see how the batch is closed.",
                             "{x} looks relevant; opening it."),
               "grep": ("Let me search for {x}.", "Checking where {x} is called."),
               "run": ("Running {x} to reproduce.", "Let me rerun the tests: {x}")},
        uses=("Going back to {x}, which I saw earlier: this is what the fix has to match.",
              "Using {x} from before.", "The earlier output had {x}; applying that now."),
        log_lines=("WARN retrying {x} after timeout", "ERROR {x} failed to reconcile batch",
                   "INFO {x} finished"),
        final="Done: the fix is in place, the regression test passes, and the summary is above."),
    "pt": Prose(
        system="Você é um agente de programação num monorepo de pagamentos. Use as ferramentas; "
               "faça mudanças pequenas.",
        task="O job noturno de conciliação voltou a falhar. O que sabemos até agora: {x}. Encontre a "
             "causa, corrija com um teste e me diga o que mudou.",
        follow_ups=("Mais uma coisa: o financeiro diz que o valor afetado é {x}; garanta que a correção "
                    "cobre esse caso.",
                    "Antes de terminar, confira {x} — apareceu no canal do incidente."),
        notes={"read_file": ("Vou ler {x} para entender como o lote é fechado.",
                             "{x} parece relevante; abrindo o arquivo."),
               "grep": ("Procurando {x} no código.", "Agora vou verificar onde {x} é chamado."),
               "run": ("Rodando {x} para reproduzir a falha.", "Rodando os testes de novo: {x}")},
        uses=("Voltando a {x}, que vi antes: é isso que a correção precisa respeitar.",
              "Usando {x} de antes.", "A saída anterior tinha {x}; aplicando agora."),
        log_lines=("AVISO nova tentativa de {x} após timeout", "ERRO {x} falhou ao conciliar o lote",
                   "INFO {x} concluído"),
        final="Pronto: a correção está aplicada, o teste de regressão passa e o resumo está acima."),
    "zh": Prose(
        system="你是一个在支付代码仓库中工作的编程助手。请使用工具，改动尽量小。",
        task="夜间结算任务又失败了。目前已知：{x}。请找出原因，补充测试并修复，然后告诉我改了什么。",
        follow_ups=("另外：财务说受影响的金额是{x}，请确认修复覆盖了这种情况。",
                    "结束之前，请再核对一下 {x} ——事故频道里提到过。"),
        notes={"read_file": ("先读取 {x}，看看批次是怎么关闭的。", "{x} 看起来相关，打开看看。"),
               "grep": ("在代码里搜索{x}。", "接下来检查{x}的调用位置。"),
               "run": ("运行 {x} 复现问题。", "重新跑一遍测试：{x}")},
        uses=("回到之前看到的 {x}：修复必须与它一致。", "使用之前的{x}。",
              "之前的输出里有 {x}，现在应用它。"),
        log_lines=("警告 {x} 超时后重试", "错误 {x} 对账失败", "信息 {x} 已完成"),
        final="完成：修复已经生效，回归测试通过，总结见上。"),
    "ja": Prose(
        system="あなたは決済モノレポで作業するコーディングエージェントです。ツールを使い、変更は小さく。",
        task="夜間の精算ジョブがまた失敗しています。現時点でわかっていること：{x}。原因を特定し、"
             "テスト付きで修正して、何を変えたか教えてください。",
        follow_ups=("追加：経理によると影響を受けた金額は{x}です。修正がこのケースを含むか確認してください。",
                    "終わる前に {x} をもう一度確認してください。障害チャンネルで話題になりました。"),
        notes={"read_file": ("{x} を読んでバッチの締め方を確認します。",
                             "{x} が関係していそうなので開きます。"),
               "grep": ("コード内で{x}を検索します。", "次に{x}の呼び出し元を確認します。"),
               "run": ("{x} を実行して再現します。", "テストを再実行します：{x}")},
        uses=("前に見た {x} に戻ります。修正はこれに合わせる必要があります。", "先ほどの{x}を使います。",
              "以前の出力に {x} がありました。今それを適用します。"),
        log_lines=("警告 {x} タイムアウト後に再試行", "エラー {x} バッチの照合に失敗", "情報 {x} 完了"),
        final="完了しました。修正を適用し、回帰テストが通り、要約は上の通りです。"),
}
