"""The project's labelled decisions: written by hand here, written out as JSON Lines by `main()`.

    .venv/bin/python tests/data/build_decisions.py      # rewrites decisions.jsonl and decisions_small.jsonl

Every case below was written by a person: the evidence, the question and the options, with the gold option
listed FIRST in its option string (a writing convention only). The order the endpoint sees is assigned here,
by a fixed rule, so that no method can score well by preferring a position: the cases with the same option
count N are sorted by kind, then gold id, then file order, and dealt the gold positions 0, 1, ..., N-1, 0, 1, ...
in that order. So every position gets an equal share (to within one) of the cases with N options, and so does
every run of one kind and one gold id (a "yes" answer sits first as often as second). The other options fill
the remaining positions in an order shuffled with a seed derived from the case id. `tests/tools/evaluate` checks that
the committed files are exactly what this script writes. See README.md next to this file.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.evaluate.calibration_fit import held_out

HERE = Path(__file__).resolve().parent
FULL = HERE / "decisions.jsonl"
SMALL = HERE / "decisions_small.jsonl"
# The small file: per kind, the first cases on each side of the calibration split (so a test can fit and check).
SMALL_FIT_PER_KIND = 2
SMALL_HELDOUT_PER_KIND = 1


@dataclass(frozen=True)
class Written:
    """One case as written: `options` is a space-separated list of option ids, the gold one first."""

    state: Any
    options: str
    question: str | None = None  # None: the kind's questions, in turn
    note: str | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    questions: tuple[str, ...]
    descriptions: Mapping[str, str]  # option id -> description, shared by the kind's cases
    cases: tuple[Written, ...]


W = Written

ROUTING = Kind(
    "routing",
    ("Which team should handle this ticket?", "Route this support request to the right team.",
     "Which queue does this message belong in?"),
    {"billing": "Billing: invoices, charges, payment methods, refunds of payments",
     "technical": "Technical support: errors, bugs, crashes, the product not working",
     "shipping": "Shipping and delivery: parcels, tracking, couriers, delivery dates and destinations",
     "account": "Account and security: logins, passwords, two-factor codes, suspicious account activity",
     "sales": "Sales: quotes, new purchases, more seats, plan upgrades, volume and education pricing",
     "privacy": "Privacy and legal: personal data requests, GDPR, contracts, legal notices",
     "returns": "Returns: sending items back, exchanges, return labels"},
    (
        W("Hi, I was charged twice for my March invoice (INV-20931). Please reverse one of the charges.",
          "billing technical shipping sales"),
        W("The app crashes every time I open the Reports tab since version 4.2. I reinstalled it, same thing.",
          "technical billing account shipping sales"),
        W("My package was supposed to arrive on Tuesday. Tracking number 1Z999AA10123456784 has said "
          "'in transit' for a week now.", "shipping technical billing"),
        W("Someone logged into my account from another country last night and changed my email address. "
          "I did not do this.", "account technical billing privacy"),
        W("We are a team of 250 people and would like a quote for the enterprise plan with annual billing.",
          "sales billing technical account"),
        W("Under Article 15 of the GDPR I request a copy of all personal data you hold about me.",
          "privacy account technical billing sales"),
        W("The jacket I ordered is too small. How do I send it back and get the next size up instead?",
          "returns shipping billing technical"),
        W({"channel": "email", "subject": "Card declined when renewing",
           "body": "My renewal failed with 'card declined' but the card works everywhere else. I updated the "
                   "expiry date and it still fails. Can I pay another way?"},
          "billing technical sales"),
        W("I forgot my password and the reset email never arrives. I already checked the spam folder.",
          "account shipping billing sales"),
        W("Your API returns HTTP 500 on POST /v2/orders since this morning; GET requests work fine.",
          "technical sales shipping privacy billing account"),
        W("The courier left my parcel at the wrong address; the delivery photo shows a door that isn't mine.",
          "shipping returns account technical"),
        W("Please erase all personal data you store about me, as is my right under the GDPR.",
          "privacy billing shipping"),
        W("Can we add 10 more seats to our current plan, and what would that cost per month?",
          "sales technical shipping"),
        W("I need a VAT invoice showing our company's tax number for the payment we made on 2 May.",
          "billing sales privacy returns"),
        W("After the last update the printer driver shows error 0x80070005 and nothing prints any more.",
          "technical returns billing"),
        W({"order": "A-5512", "message": "The box arrived crushed and two of the glasses are broken. I'd like to "
                                         "exchange them for new ones.", "photos_attached": 2},
          "returns sales account technical"),
        W("The codes from my authenticator app are rejected at sign-in, so I'm locked out of my account.",
          "account shipping sales billing returns"),
        W("Our lawyers need to serve a legal notice on your company. Who should they send it to?",
          "privacy sales technical"),
        W("My subscription renewed at $49 instead of the $29 I was charged last year. Please refund the "
          "difference.", "billing technical shipping account privacy"),
        W("Is there an education discount if our school buys 40 licences?",
          "sales billing returns technical privacy shipping"),
        W("Sync between the desktop and mobile apps has stopped: changes I make on the phone never show up "
          "on the laptop.", "technical account sales"),
        W("The delivery date of my order keeps moving: first it was the 3rd, now it says the 9th. Where is it "
          "actually?", "shipping billing technical sales privacy"),
        W({"from": "it-admin@client.example", "subject": "Export to CSV gives empty files",
           "text": "Exporting any report to CSV produces a 0-byte file. Export to PDF still works."},
          "technical privacy billing returns"),
        W("I sent the blender back two weeks ago with return label RMA-7731 but have heard nothing since. Has "
          "it been received?", "returns sales account technical"),
        W("I got an email pretending to be from you asking me to confirm my password. Has my account been "
          "compromised? Should I change my password?", "account billing shipping sales"),
        W("Please sign and return the attached data processing agreement so that our procurement can proceed.",
          "privacy technical shipping billing"),
        W("Do you deliver to Norway, and how long does delivery take there?",
          "shipping account technical privacy"),
        W("My bank statement lists a charge called 'SVC-FEE 4.99' from you that I don't recognise. What is it for?",
          "billing returns technical sales shipping privacy account"),
    ),
)

SENTIMENT = Kind(
    "sentiment",
    ("What is the sentiment of this review?", "How does the writer feel?",
     "Classify the sentiment of this text."),
    {"positive": "Positive: the writer is pleased or satisfied",
     "negative": "Negative: the writer is unhappy or dissatisfied",
     "neutral": "Neutral: factual, no feeling either way",
     "mixed": "Mixed: clear praise and clear complaints together"},
    (
        W("Arrived a day early, fits perfectly and the fabric feels great. Will buy again.",
          "positive negative neutral"),
        W("Stopped working after 3 days. Support never replied. Complete waste of money.", "negative positive"),
        W("The package contains the charger, a USB-C cable and a quick start guide.",
          "neutral positive negative"),
        W("Great camera, but the battery barely lasts half a day, which is a real problem on trips.",
          "mixed positive negative neutral"),
        W("Honestly the best customer service I have ever had from an airline. Thank you, Maria!",
          "positive negative neutral mixed"),
        W("The room smelled of smoke and the air conditioning was broken. We left after one night.",
          "negative positive neutral"),
        W("I ordered the blue version. Delivery took five working days.", "neutral positive negative mixed"),
        W("Not bad at all, much better than I expected for the price.", "positive negative"),
        W("The update deleted all my saved playlists. I'm furious.", "negative positive neutral mixed"),
        W({"rating": 5, "title": "Love it", "text": "Easy to set up and the kids use it every day."},
          "positive negative neutral"),
        W({"rating": 1, "title": "Broken on arrival", "text": "The screen was cracked inside a sealed box. "
                                                              "Returning it."},
          "negative positive neutral mixed"),
        W("The food was delicious, but we waited 90 minutes for it and the waiter was rude.",
          "mixed positive negative neutral"),
        W("The meeting has moved to Thursday at 10:00 in room 4B.", "neutral positive negative"),
        W("I can't recommend this enough. It has changed how I cook.", "positive negative neutral"),
        W("Would give zero stars if I could.", "negative positive"),
        W("The manual is available in English, German and French.", "neutral positive negative mixed"),
        W("Fast shipping, nice packaging, and the seller even added a handwritten thank-you note.",
          "positive negative neutral mixed"),
        W("The course content was excellent; the video quality, however, was so poor I could barely read "
          "the slides.", "mixed positive negative neutral"),
        W("Third time this month the train was cancelled without notice. Unacceptable.",
          "negative positive neutral"),
        W("Package dimensions: 30 x 20 x 10 cm, weight 1.2 kg.", "neutral positive negative"),
        W("Absolutely thrilled with the renovation: the team was punctual, friendly and tidy.",
          "positive negative"),
        W("The headphones hurt my ears after twenty minutes and the sound is muddy.",
          "negative positive neutral mixed"),
        W("Lovely hotel, friendly staff, perfect location right next to the old town.",
          "positive negative neutral"),
        W("The app asks me to log in again every single time I open it. So annoying.", "negative positive"),
        W("Our order number is 55-1123 and it was placed on Friday.", "neutral positive negative mixed"),
        W({"rating": 5, "text": "Exactly what I needed, and the price was fair."},
          "positive negative neutral mixed"),
        W("Cheap plastic, wobbly legs, and one of the screws was missing.", "negative positive neutral"),
        W("The new office is bright and spacious, but the commute is now twice as long for most of us, which "
          "everyone hates.", "mixed positive negative neutral"),
    ),
)

MODERATION = Kind(
    "moderation",
    ("Which moderation label fits this post?", "Does this message break the community rules, and how?"),
    {"allow": "Acceptable: breaks no rule",
     "spam": "Spam: unsolicited advertising or repeated self-promotion",
     "harassment": "Harassment: insults or attacks aimed at a person",
     "threat": "A threat of violence against someone",
     "personal_data": "Exposes someone's private personal data (home address, phone number, ID documents)",
     "scam": "A scam or phishing attempt to get money or login details"},
    (
        W("Does anyone know if the library is open on Sunday?", "allow spam harassment"),
        W("BUY CHEAP WATCHES!!! 90% OFF at best-watch-deals.example, limited time only!!!",
          "spam allow harassment personal_data"),
        W("You are an idiot and everyone in this forum knows it. Go away.", "harassment allow spam"),
        W("If you show up at the meeting tomorrow I will hurt you. You've been warned.",
          "threat allow spam personal_data"),
        W("Here is her home address: 12 Elm Street, Apt 4, and her phone number is 555-0143.",
          "personal_data allow spam"),
        W("Your account has been suspended. Verify your password at secure-login-verify.example within 24 hours "
          "or it will be deleted.", "scam allow harassment"),
        W("Thanks for the detailed explanation, that fixed my issue.", "allow spam harassment threat scam"),
        W("Congratulations! You won a $1,000 gift card. Send a $20 processing fee to claim it.",
          "scam allow threat"),
        W({"post": "Check out my channel!!! Subscribe subscribe subscribe", "posted_under": "every thread today",
           "copies": 37}, "spam allow personal_data"),
        W("I disagree with your point about the budget; the numbers in table 2 don't add up.",
          "allow harassment spam"),
        W("Nobody wants you here, you pathetic loser. Just quit.", "harassment allow scam personal_data"),
        W("Posting the passport of the guy who owes me money: passport number X1234567, born 03/04/1988, lives "
          "at 8 Mill Lane.", "personal_data allow spam threat"),
        W("The recipe calls for 200 g of flour; I used oat flour and it worked well.",
          "allow spam scam personal_data harassment threat"),
        W("I know where you live and I'll burn your car if you post that again.", "threat allow spam"),
        W("Visit cheap-sneakers-outlet.example for the best prices!!! Visit now!!! Visit now!!!",
          "spam allow harassment"),
        W("Hi, this is IT support. Please reply with your username and password so we can upgrade your mailbox.",
          "scam allow harassment personal_data"),
        W("This movie was terrible; the ending made no sense at all.", "allow harassment threat"),
        W("Can someone recommend a good plumber in the north of town?", "allow spam"),
        W("Shut up, nobody asked for your stupid opinion, moron.", "harassment allow"),
        W("Cheap phone cases!!! Free delivery!!! Order at cases4less.example, use code SAVE50!!!",
          "spam allow harassment threat personal_data"),
        W("Her phone number is 0176 5550199 and her flat is the one above the bakery on King Street.",
          "personal_data allow scam"),
        W("Your parcel could not be delivered. Pay the 1.99 EUR customs fee here: parcel-fee-pay.example",
          "scam allow harassment threat"),
        W("Great game last night! That last-minute goal was unbelievable.", "allow spam harassment scam"),
        W("Keep talking and you'll find out what happens to people like you. I carry a knife.",
          "threat allow personal_data spam scam"),
        W("The meeting notes are in the shared folder, under 'Q3 planning'.",
          "allow spam harassment personal_data"),
        W("You're so ugly it hurts to look at your profile picture.",
          "harassment allow spam scam personal_data"),
        W("Limited offer!!! Crypto doubling service: send us 1 BTC and receive 2 BTC back within an hour.",
          "scam allow harassment"),
    ),
)

URGENCY = Kind(
    "urgency",
    ("How urgent is this?", "What priority should this ticket get?"),
    {"critical": "Critical: outage or harm happening now, act immediately",
     "high": "High: serious, must be handled within hours",
     "medium": "Medium: degraded or inconvenient, handle within a few days",
     "low": "Low: cosmetic or a wish, whenever convenient"},
    (
        W("The production database is down; the web shop returns errors to every customer.",
          "critical high medium low"),
        W("Typo on the About page: 'recieve' should be 'receive'.", "low critical high medium"),
        W({"service": "payments", "error_rate": 0.42, "duration_min": 12, "customers_affected": "all"},
          "critical high medium low"),
        W("Could you change the dashboard header to our new brand blue when you have time?",
          "low high medium"),
        W("Our main office has lost its internet connection and the backup line is down too; 80 people "
          "cannot work.", "critical high medium low"),
        W("The printer on floor 3 jams about once a day; the two other printers on that floor work fine.",
          "low high medium"),
        W("Several users report that search results load slowly since yesterday, but everything still works.",
          "medium critical high low"),
        W("Smoke is coming out of the server rack in room B.", "critical high medium low"),
        W({"alert": "certificate_expiry", "domain": "api.example.com", "expires_in_hours": 6,
           "currently_valid": True}, "high critical medium low"),
        W("The CEO's laptop won't boot and she presents to the board in two hours.", "high medium low"),
        W("Feature request: please add a dark mode to the internal wiki.", "low critical high medium"),
        W("The checkout on our website is failing for every customer right now.", "critical high medium low"),
        W("An attacker is exfiltrating data from our file server at this moment; we can see the traffic.",
          "critical high medium low"),
        W("Please update my job title in the staff directory from 'Analyst' to 'Senior Analyst'.",
          "low high medium"),
        W("The VPN drops every hour for one remote team; they reconnect and keep working.",
          "medium critical high low"),
        W("Payroll must run today at 15:00 and the payroll system rejects every login.", "high medium low"),
        W({"ticket": 4471, "summary": "Meeting room display flickers", "impact": "one room, meetings continue",
           "workaround": "use the laptop screen"}, "low critical high medium"),
        W("The shared calendar doesn't show public holidays; it would be nice to have them.",
          "low critical high medium"),
        W("The elevator is stuck between floors with two people inside.", "critical high medium low"),
        W("Water from a ceiling leak is dripping onto the main network switch.", "critical high medium low"),
        W("The quarterly tax filing is due at midnight tonight and the accounting software crashes on submit.",
          "high medium low"),
        W("The font on the printed name badges is slightly too small.", "low critical high medium"),
        W("A contractor's contract ended today and his building access badge is still active. Please "
          "deactivate it.", "high critical medium low"),
        W({"service": "email-gateway", "status": "down", "since_minutes": 35,
           "impact": "no email in or out for the whole company"}, "critical high medium low"),
        W("The coffee machine in the kitchen displays 'descale soon'.", "low high medium"),
        W("Some scheduled reports arrive an hour late; the data in them is correct.", "medium critical high low"),
        W("The staging environment has been slow since Tuesday; developers can still deploy, it just takes "
          "longer.", "medium high low"),
        W("Our API partner sees intermittent 502 errors on about 2% of requests since this morning; retries "
          "succeed.", "medium critical high low"),
    ),
)

INTENT = Kind(
    "intent",
    ("What does the customer want?", "Which intent does this chat message express?"),
    {"cancel_subscription": "Cancel a subscription or membership",
     "track_order": "Find out where an order is",
     "change_address": "Change the delivery address of an order",
     "reset_password": "Reset or recover a password",
     "update_payment": "Change the payment card or payment method",
     "human_agent": "Talk to a human agent",
     "product_info": "Ask about a product's features or contents",
     "opening_hours": "Ask when a store or service is open",
     "refund_status": "Ask when a refund will arrive",
     "complaint": "Complain about the service received"},
    (
        W("i want to stop my membership, how do i end it",
          "cancel_subscription track_order update_payment human_agent"),
        W("where is my order #88123? it said 2 days", "track_order change_address refund_status product_info "
                                                      "opening_hours"),
        W("I moved last week, please send the parcel to 14 Oak Road instead",
          "change_address track_order cancel_subscription update_payment complaint reset_password"),
        W("can't remember my password and now I'm locked out",
          "reset_password update_payment human_agent track_order"),
        W("my card expired, I need to put in the new one",
          "update_payment reset_password cancel_subscription refund_status product_info"),
        W("stop the bot, I want a real person", "human_agent complaint product_info opening_hours "
                                                "track_order change_address reset_password"),
        W("does the X200 vacuum work on thick carpets?",
          "product_info opening_hours track_order complaint"),
        W("When does the downtown store open on Saturdays?",
          "opening_hours product_info human_agent change_address cancel_subscription"),
        W("You told me my refund was processed three weeks ago and I still don't see it. When will it arrive?",
          "refund_status track_order update_payment human_agent cancel_subscription product_info "
          "opening_hours reset_password"),
        W("Your delivery driver threw my package over the fence and was rude to my mother. This is unacceptable.",
          "complaint track_order refund_status opening_hours"),
        W("please cancel my plan before it renews on the 1st",
          "cancel_subscription update_payment refund_status track_order change_address"),
        W("Has my parcel shipped yet?", "track_order product_info opening_hours reset_password"),
        W("Can I pay with PayPal instead of my credit card from now on?",
          "update_payment cancel_subscription product_info human_agent complaint opening_hours"),
        W("How many litres is the large backpack, and is it waterproof?",
          "product_info opening_hours refund_status track_order update_payment"),
        W("Are you open on Christmas Eve?", "opening_hours product_info track_order human_agent complaint "
                                            "change_address cancel_subscription reset_password"),
        W("I typed my address wrong: it's flat 3B, not 3D. Can you fix it before it ships?",
          "change_address reset_password track_order product_info"),
        W("forgot pw", "reset_password change_address update_payment opening_hours complaint"),
        W("Connect me to one of your staff please, this chat is not helping",
          "human_agent product_info reset_password track_order opening_hours update_payment"),
        W("I returned the shoes on the 2nd, when do I get my money back?",
          "refund_status cancel_subscription product_info change_address"),
        W("I've waited on hold for an hour, twice now. Your service has become terrible.",
          "complaint product_info change_address reset_password update_payment"),
        W("Is the charger included with the phone or sold separately?",
          "product_info track_order refund_status update_payment human_agent cancel_subscription opening_hours"),
        W("Tracking hasn't updated since Monday, where is it?",
          "track_order reset_password product_info cancel_subscription"),
        W("I don't want to be billed every month any more, end my subscription",
          "cancel_subscription product_info opening_hours track_order change_address"),
        W("What time does customer support close on weekdays?",
          "opening_hours reset_password track_order update_payment product_info refund_status"),
        W("The password reset link says it expired. How do I get a new one?",
          "reset_password opening_hours refund_status product_info"),
        W("Replace my Visa ending 4412 with my Mastercard",
          "update_payment product_info track_order change_address reset_password opening_hours complaint "
          "human_agent"),
        W("Send my order to my office address instead of my home, please.",
          "change_address refund_status opening_hours product_info update_payment"),
        W("I want to speak with a manager, not a bot.",
          "human_agent track_order update_payment opening_hours"),
    ),
)

LANGUAGE = Kind(
    "language",
    ("In which language is this message written?", "Which language is this text in?"),
    {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
     "nl": "Dutch", "sv": "Swedish", "pl": "Polish", "tr": "Turkish", "fi": "Finnish"},
    (
        W("Bonjour, je voudrais annuler ma commande, s'il vous plaît.", "fr en de"),
        W("Können Sie mir bitte sagen, wann das Paket ankommt?", "de nl en sv fr"),
        W("Hola, ¿podrían enviarme otra vez la factura de marzo?", "es it en pl"),
        W("Buongiorno, vorrei sapere se il negozio è aperto domenica.", "it es fr en de tr"),
        W("Olá, não consigo acessar a minha conta desde ontem.", "pt en fr pl"),
        W("Goedemorgen, mijn bestelling is nog steeds niet aangekomen.", "nl de en sv fi tr it"),
        W("Could you please resend the confirmation email?", "en fr de"),
        W("Hej, jag har fortfarande inte fått min beställning.", "sv en de nl pl fr it pt"),
        W("Dzień dobry, chciałbym zwrócić tę kurtkę.", "pl tr en de"),
        W("Merhaba, siparişim ne zaman gelecek?", "tr en fi pl de"),
        W("Hei, tilaukseni ei ole vielä saapunut.", "fi sv en tr nl de"),
        W("Le produit est arrivé cassé, que dois-je faire ?", "fr es en"),
        W("Ich habe mein Passwort vergessen und kann mich nicht anmelden.", "de en pl nl"),
        W("Mi pedido llegó incompleto, falta un zapato.", "es en fr de it tr nl"),
        W("Il pacco è arrivato danneggiato, posso avere un rimborso?", "it en de pl fi"),
        W("O meu pedido chegou com o tamanho errado.", "pt de en nl it sv tr fi"),
        W("Kunt u mij helpen met het wijzigen van mijn adres?", "nl en fr"),
        W("The invoice total does not match the quote you sent us last week.", "en de fr es sv nl"),
        W("Kan ni hjälpa mig att byta leveransadress?", "sv en pl tr"),
        W("Moja paczka nie dotarła, proszę o pomoc.", "pl en de fr it"),
        W("Faturamda yanlış bir ücret var.", "tr de en"),  # noqa: RUF001 (Turkish dotless i)
        W("Voinko vaihtaa toimitusosoitteeni?", "fi en pl tr de fr es"),
        W({"channel": "chat", "message": "Wo finde ich die Rechnung für meine letzte Bestellung?"},
          "de en it fr"),
        W({"subject": "Remboursement", "body": "J'attends toujours le remboursement de ma commande du 3 mai."},
          "fr en de it es nl"),
        W("¿A qué hora cierra la tienda los sábados?", "es en de fr it"),
        W("Non riesco a trovare il numero di tracciamento.", "it en fr"),
        W("Thanks, the replacement arrived this morning and works perfectly.", "en fr de es it pt nl sv"),
        W("Vocês entregam em Lisboa aos domingos?", "pt en de fr tr"),
    ),
)


def yes_no(state: Any, question: str, gold: str, yes: str = "yes", no: str = "no") -> Written:
    """A policy check: the options are `yes` and `no` (or the given ids), the gold one first."""
    return W(state, f"{gold} {no if gold == yes else yes}", question)


EXPENSE = "Company policy: hotel costs are reimbursed up to 180 EUR per night. Is this expense within policy?"
RETURNS = ("Return policy: unopened items can be returned within 30 days of the order date. Is this return "
           "eligible?")
PAYROLL = "Access policy: only HR staff may access the payroll system. Should this access be granted?"
PASSWORD = "Password rule: at least 12 characters, including at least one digit. Does this password meet the rule?"
ALCOHOL = "Store policy: alcohol may only be sold to customers aged 18 or older. May this sale go ahead?"
SHIPPING = ("Free shipping applies to orders of 50 EUR or more delivered within the EU. Does this order get free "
            "shipping?")
LEAVE = "An employee may not take more leave days than remain in their balance. Can this request be approved?"
RETENTION = "Rejected job applications must be deleted 6 months after the rejection. Must this record be deleted now?"
ADS = "Ad policy: ads must not make guaranteed health or weight-loss claims. Is this ad allowed?"
TRAVEL = "Travel policy: business class is allowed only on flights longer than 6 hours. Is this booking compliant?"
MERGE = "Merge rule: a pull request needs at least 2 approvals and passing tests. Can it be merged?"
DISCOUNT = "Discounts above 20% need a director's approval. Is this discount properly approved?"
VOUCHER = "Customers get a voucher when a delivery is more than 3 days late. Does this customer get a voucher?"
HOURS = "Employees may not work more than 48 hours in a week. Is this week within the limit?"

POLICY = Kind(
    "policy",
    ("Does this comply with the policy?",),
    {"yes": "Yes", "no": "No",
     "approve": "Approve: the request meets the rule", "reject": "Reject: the request breaks the rule",
     "eligible": "Eligible under the rule", "not_eligible": "Not eligible under the rule"},
    (
        yes_no({"employee": "J. Ortiz", "category": "hotel", "amount_eur": 420, "nights": 2, "city": "Munich"},
               EXPENSE, "no"),
        yes_no({"employee": "A. Chen", "category": "hotel", "amount_eur": 300, "nights": 2, "city": "Lyon"},
               EXPENSE, "yes"),
        yes_no({"order_date": "2025-03-01", "return_requested": "2025-03-20", "item_condition": "unopened"},
               RETURNS, "eligible", "eligible", "not_eligible"),
        yes_no({"order_date": "2025-01-05", "return_requested": "2025-03-01", "item_condition": "unopened"},
               RETURNS, "not_eligible", "eligible", "not_eligible"),
        yes_no({"requester_role": "marketing intern", "system": "payroll", "approved_by_manager": True},
               PAYROLL, "reject", "approve", "reject"),
        yes_no({"requester_role": "HR specialist", "system": "payroll", "approved_by_manager": True},
               PAYROLL, "approve", "approve", "reject"),
        yes_no("Proposed password: summer", PASSWORD, "no"),
        yes_no("Proposed password: blue-Harbor-2931-kite", PASSWORD, "yes"),
        yes_no({"customer_age": 17, "product": "beer", "id_checked": True}, ALCOHOL, "no"),
        yes_no({"customer_age": 34, "product": "red wine", "id_checked": True}, ALCOHOL, "yes"),
        yes_no("Order total: 48.50 EUR. Destination: Vienna, Austria.", SHIPPING, "no"),
        yes_no("Order total: 72.00 EUR. Destination: Valencia, Spain.", SHIPPING, "yes"),
        yes_no({"employee": "R. Singh", "days_requested": 12, "remaining_leave_days": 8}, LEAVE,
               "reject", "approve", "reject"),
        yes_no({"employee": "M. Rossi", "days_requested": 5, "remaining_leave_days": 14}, LEAVE,
               "approve", "approve", "reject"),
        yes_no({"record_type": "job application", "rejected_on": "2023-02-10", "today": "2025-06-01"},
               RETENTION, "yes"),
        yes_no({"record_type": "job application", "rejected_on": "2025-05-02", "today": "2025-06-01"},
               RETENTION, "no"),
        yes_no("Ad text: 'Lose 10 kg in 3 days, guaranteed, no diet needed!'", ADS, "no"),
        yes_no("Ad text: 'Our running shoes now come in six new colours.'", ADS, "yes"),
        yes_no({"traveller": "K. Ito", "flight_duration_hours": 3, "class": "business"}, TRAVEL, "no"),
        yes_no({"traveller": "L. Park", "flight_duration_hours": 11, "class": "business"}, TRAVEL, "yes"),
        yes_no({"pull_request": 812, "approvals": 1, "tests_passed": True}, MERGE, "no"),
        yes_no({"pull_request": 815, "approvals": 2, "tests_passed": True}, MERGE, "yes"),
        yes_no({"deal": "ACME renewal", "discount_percent": 25, "approved_by": "team lead"}, DISCOUNT, "no"),
        yes_no({"deal": "Globex upsell", "discount_percent": 15, "approved_by": "team lead"}, DISCOUNT, "yes"),
        yes_no("Delivery promised for 3 June, delivered on 4 June.", VOUCHER, "no"),
        yes_no("Delivery promised for 3 June, delivered on 12 June.", VOUCHER, "yes"),
        yes_no({"employee": "D. Novak", "hours_worked_this_week": 52}, HOURS, "no"),
        yes_no({"employee": "S. Haddad", "hours_worked_this_week": 40}, HOURS, "yes"),
    ),
)

TOPIC = Kind(
    "topic",
    ("What is this headline about?", "Which section of the news site should this article go in?"),
    {"sports": "Sport: matches, athletes, competitions",
     "politics": "Politics: government, elections, parliament",
     "business": "Business and economy: companies, markets, jobs, interest rates",
     "technology": "Technology: devices, software, the internet",
     "health": "Health and medicine",
     "science": "Science: research and discoveries",
     "entertainment": "Entertainment: film, music, TV, celebrities",
     "weather": "Weather and forecasts"},
    (
        W("Local team wins the championship after a penalty shoot-out", "sports politics business"),
        W("Parliament passes the new budget after an all-night session",
          "politics sports business technology entertainment"),
        W("Shares of the carmaker fall 8% after weak quarterly results",
          "business technology politics sports health science"),
        W("New smartphone chip promises twice the battery life", "technology business science weather"),
        W("Study links regular walking to a lower risk of heart disease",
          "health science sports technology entertainment politics weather"),
        W("Astronomers detect water vapour on a distant exoplanet", "science technology health entertainment"),
        W("The singer announces a world tour starting in March",
          "entertainment business sports politics weather science technology health"),
        W("Heavy snow expected across the north this weekend, with up to 40 cm", "weather sports science"),
        W("Marathon record broken by 30 seconds in Berlin", "sports science weather health entertainment"),
        W("Minister resigns amid questions over campaign funding", "politics business entertainment"),
        W("Central bank raises interest rates by a quarter point",
          "business politics technology science weather sports"),
        W("Software update fixes a security flaw in a popular web browser",
          "technology science business politics health"),
        W("Hospitals report a rise in flu cases as winter begins", "health weather science business"),
        W("Fossil of a new dinosaur species discovered in Patagonia",
          "science entertainment technology weather sports health politics"),
        W("Film wins best picture at the annual awards ceremony", "entertainment business sports"),
        W("Heatwave: temperatures to reach 38 degrees on Thursday",
          "weather health science politics business technology entertainment sports"),
        W("Tennis star withdraws from the final with a knee injury", "sports entertainment business weather"),
        W("Voters head to the polls in the regional election", "politics sports weather business entertainment"),
        W("Retail chain to close 40 stores and cut 1,200 jobs", "business politics technology"),
        W("Startup unveils a robot that folds laundry", "technology sports health politics weather entertainment"),
        W("New guidelines recommend less sugar in children's diets", "health business technology sports"),
        W("Researchers map the genome of the honeybee", "science sports politics business entertainment"),
        W("Streaming series renewed for a third season", "entertainment technology science weather politics "
                                                         "health business"),
        W("Storm warning issued for the coast, with gusts up to 120 km/h", "weather politics sports"),
        W("Coach sacked after five straight defeats", "sports business politics entertainment"),
        W("Merger of two airlines approved by regulators", "business technology entertainment sports weather"),
        W("Senate committee opens hearing on the data privacy bill", "politics sports weather health"),
    ),
)

KINDS = (ROUTING, SENTIMENT, MODERATION, URGENCY, INTENT, LANGUAGE, POLICY, TOPIC)


def _arrange(case_id: str, option_ids: list[str], gold_position: int) -> list[str]:
    """The gold option (written first) at `gold_position`, the others in an order seeded by the case id."""
    gold, others = option_ids[0], option_ids[1:]
    random.Random(case_id).shuffle(others)
    return [*others[:gold_position], gold, *others[gold_position:]]


def gold_positions(strata: list[tuple[int, str, str]]) -> list[int]:
    """Where each case's gold option goes, from its (option count, kind, gold id), as the module docstring says."""
    positions = [0] * len(strata)
    for count in {count for count, _, _ in strata}:
        same = sorted((stratum, index) for index, stratum in enumerate(strata) if stratum[0] == count)
        for rank, (_, index) in enumerate(same):
            positions[index] = rank % count
    return positions


def build() -> Iterator[dict[str, Any]]:
    """Every case, in file order, as the evaluator reads it."""
    written = [(kind, number, case) for kind in KINDS for number, case in enumerate(kind.cases, start=1)]
    positions = gold_positions([(len(case.options.split()), f"{KINDS.index(kind):02d}", case.options.split()[0])
                                for kind, _, case in written])
    for (kind, number, case), position in zip(written, positions, strict=True):
        case_id = f"{kind.name}-{number:03d}"
        option_ids = case.options.split()
        if len(set(option_ids)) != len(option_ids) or not set(option_ids) <= set(kind.descriptions):
            raise ValueError(f"{case_id}: options {option_ids} repeat or are not in the kind's list")
        question = case.question or kind.questions[(number - 1) % len(kind.questions)]
        options = [{"id": i, "description": kind.descriptions[i]} for i in _arrange(case_id, option_ids, position)]
        line: dict[str, Any] = {
            "decision": {"id": case_id, "state": case.state, "question": question, "options": options},
            "gold": option_ids[0], "kind": kind.name}
        if case.note:
            line["note"] = case.note
        yield line


def small(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluator tests' fixed file: per kind, the first 2 cases of the fit split and the first held out."""
    wanted = {False: SMALL_FIT_PER_KIND, True: SMALL_HELDOUT_PER_KIND}
    taken: Counter[tuple[str, bool]] = Counter()
    chosen = []
    for case in cases:
        side = (case["kind"], held_out(case["decision"]["id"]))
        if taken[side] < wanted[side[1]]:
            taken[side] += 1
            chosen.append(case)
    return chosen


def jsonl(cases: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)


def main() -> int:
    cases = list(build())
    FULL.write_text(jsonl(cases), encoding="utf-8")
    SMALL.write_text(jsonl(small(cases)), encoding="utf-8")
    print(f"{len(cases)} cases -> {FULL.name}, {len(small(cases))} -> {SMALL.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
