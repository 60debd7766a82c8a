"""The fixed decisions a conversion is measured on (agreement.py), apart from the engine that scores them, so a
command can name their count without loading llama.cpp."""

from __future__ import annotations

from ..doors.request_schema import Decision, Option


def _decision(ident: str, state: str, question: str, *options: str) -> Decision:
    return Decision(id=ident, state=state, question=question,
                    options=[Option(id=f"o{index}", description=text) for index, text in enumerate(options)])


# Kinds of decision a deployment makes (routing, sentiment, urgency, moderation, intent, language, policy), 2-4
# options, short states: fixed, so figures from two runs are comparable.
DECISIONS = (
    _decision("route", "My card was charged twice for the same order.", "Which team should handle this?",
              "Billing", "Shipping", "Technical support"),
    _decision("sentiment", "The replacement arrived early and works perfectly, thank you!",
              "What is the customer's sentiment?", "Positive", "Negative", "Neutral"),
    _decision("urgency", "Production is down for all users since 09:00 and we are losing orders.",
              "How urgent is this ticket?", "Low", "Medium", "High", "Critical"),
    _decision("moderation", "You are an idiot and I will find where you live.", "Is this message acceptable?",
              "Acceptable", "Abusive"),
    _decision("intent", "How do I change the email address on my account?", "What does the user want?",
              "Cancel the subscription", "Update account details", "Report a bug"),
    _decision("language", "Bonjour, je voudrais annuler ma commande.", "Which language is the message in?",
              "English", "French", "German", "Spanish"),
    _decision("refund", "Bought 40 days ago, unopened, receipt attached. Policy: refunds within 30 days.",
              "Does the request meet the refund policy?", "Yes", "No"),
    _decision("delivery", "Tracking shows delivered, but the parcel is not at my door or with neighbours.",
              "What should support do first?", "Open a carrier claim", "Refund at once", "Close the ticket"),
    _decision("bug", "The app crashes every time I press the export button on Android 14.",
              "Which component is most likely at fault?", "Export feature", "Login", "Payments"),
    _decision("churn", "I have found a cheaper provider and will leave at the end of the month.",
              "Is the customer likely to cancel?", "Yes", "No"),
    _decision("priority", "A VIP customer asks about the opening hours of the Lyon store.",
              "What priority should the ticket get?", "P1", "P2", "P3", "P4"),
    _decision("spam", "Congratulations!!! You won a free cruise, click here to claim now.",
              "Is this email spam?", "Spam", "Not spam"),
)
